package securitytest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
)

// request is one concrete HTTP request.
type request struct {
	method, path string
	body         string // sent as application/json; "" sends none
}

// response is an HTTP answer; for an event stream, its first event.
type response struct {
	method string // of the request
	status int
	header http.Header
	body   []byte
}

// do sends r with c's key as a bearer token (none for noKey). An event
// stream is read up to the end of its first event and then left.
func (h *hosted) do(t testing.TB, c cred, r request) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, h.url+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c != noKey {
		req.Header.Set("Authorization", "Bearer "+h.secrets[c])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer res.Body.Close()
	var out []byte
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		out = firstEvent(t, res.Body)
	} else if out, err = io.ReadAll(res.Body); err != nil {
		t.Fatalf("%s %s: read the answer: %v", r.method, r.path, err)
	}
	return response{method: r.method, status: res.StatusCode, header: res.Header, body: out}
}

// firstEvent reads a server-sent event stream up to its first blank line.
func firstEvent(t testing.TB, r io.Reader) []byte {
	t.Helper()
	var b bytes.Buffer
	sc := bufio.NewScanner(r)
	for sc.Scan() && sc.Text() != "" {
		b.WriteString(sc.Text() + "\n")
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the event stream: %v", err)
	}
	return b.Bytes()
}

func (r response) want(t testing.TB, status int) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	return r
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// wantError checks that r is an error of status in the one shape every
// route uses, {"error":{"code","message","kind"}} (details optional), and
// returns its message.
func (r response) wantError(t testing.TB, status int, kind string) string {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if r.method == http.MethodHead {
		return "" // no body
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error answer of type %q", ct)
	}
	var body struct {
		Error *struct {
			Code    *int            `json:"code"`
			Message *string         `json:"message"`
			Kind    *string         `json:"kind"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	d := json.NewDecoder(bytes.NewReader(r.body))
	d.DisallowUnknownFields()
	if err := d.Decode(&body); err != nil || body.Error == nil || body.Error.Code == nil || body.Error.Message == nil || body.Error.Kind == nil {
		t.Fatalf("error answer not {\"error\":{\"code\",\"message\",\"kind\"}}: %s (%v)", r.body, err)
	}
	e := body.Error
	if *e.Code != status || *e.Kind != kind || *e.Message == "" {
		t.Errorf("error %d %s %q, want %d %s and a message", *e.Code, *e.Kind, *e.Message, status, kind)
	}
	return *e.Message
}

// mode is what another tenant's request with acme's ids must get.
type mode int

const (
	// twin: exactly the answer to the same request with ids that nothing
	// has, and nothing changes.
	twin mode = iota
	// scope: the request names nothing of acme's; the answer (200) holds
	// nothing of acme's, and nothing changes.
	scope
	// own: the request writes under acme's ids into the caller's own
	// namespace: the same answer as with fresh ids, and nothing of acme's
	// changes (the caller's own data does).
	own
)

// variant is one concrete request of a route, built from a set of ids.
type variant struct {
	name  string
	build func(p ids) request
	cross mode
}

// route is how a route is tried: who may use it, what acme's own key gets
// with its first variant, and the requests that name acme's things in
// every place the route takes an id.
type route struct {
	public bool // answered without a key
	admin  bool // admin keys only
	write  bool // reader keys get 403
	// ok is the status of the first variant for acme's writer (its admin,
	// for admin routes): proof that the request is valid and its ids real,
	// so that the other cases' refusals mean something.
	ok       int
	variants []variant
}

// allMethods is a route registered with echo's Any.
const allMethods = "*"

// httpRoutes has a case for every registered route, keyed "METHOD path"
// as echo names them. A registered route without one fails the suite, so
// a new route comes with its security cases.
var httpRoutes = map[string]route{
	"GET /healthz":      {public: true, ok: 200, variants: fixed("GET", "/healthz")},
	"GET /openapi.yaml": {public: true, ok: 200, variants: fixed("GET", "/openapi.yaml")},
	"GET /metrics":      {admin: true, ok: 200, variants: fixed("GET", "/metrics")},
	// Every method of pprof; the first variant is sent with each.
	allMethods + " /debug/pprof/*": {admin: true, ok: 200, variants: fixed("GET", "/debug/pprof/cmdline")},

	// CardBox: the project is the tenant. Another tenant names acme's
	// project (404 as for a project that does not exist) or its own
	// project with acme's card and box ids.
	"POST /projects/:project_id/cards": {write: true, ok: 201, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"POST", "/projects/" + p.Project + "/cards", `{"cards":[` + cardJSON("acme-card-3", "a card") + `]}`}
		}, twin},
		{"own project, acme's card ids", func(p ids) request {
			return request{"POST", "/projects/" + p.OwnProject + "/cards", `{"cards":[` + cardJSON(p.Card, "a card") + `]}`}
		}, own},
	}},
	"POST /projects/:project_id/cards/batch": {ok: 200, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"POST", "/projects/" + p.Project + "/cards/batch", fmt.Sprintf(`{"card_ids":[%q]}`, p.Card)}
		}, twin},
		{"own project, acme's card ids", func(p ids) request {
			return request{"POST", "/projects/" + p.OwnProject + "/cards/batch", fmt.Sprintf(`{"card_ids":[%q,%q]}`, p.Card, p.OwnCard)}
		}, twin},
	}},
	"GET /projects/:project_id/cards/:card_id": {ok: 200, variants: []variant{
		{"acme's project", func(p ids) request { return request{"GET", "/projects/" + p.Project + "/cards/" + p.Card, ""} }, twin},
		{"own project, acme's card id", func(p ids) request { return request{"GET", "/projects/" + p.OwnProject + "/cards/" + p.Card, ""} }, twin},
	}},
	"DELETE /projects/:project_id/cards/:card_id": {write: true, ok: 204, variants: []variant{
		{"acme's project", func(p ids) request { return request{"DELETE", "/projects/" + p.Project + "/cards/" + p.DoomedCard, ""} }, twin},
		{"own project, acme's card id", func(p ids) request {
			return request{"DELETE", "/projects/" + p.OwnProject + "/cards/" + p.DoomedCard, ""}
		}, twin},
	}},
	"POST /projects/:project_id/boxes": {write: true, ok: 201, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"POST", "/projects/" + p.Project + "/boxes", fmt.Sprintf(`{"card_ids":[%q]}`, p.Card)}
		}, twin},
		{"own project, acme's card ids", func(p ids) request {
			return request{"POST", "/projects/" + p.OwnProject + "/boxes", fmt.Sprintf(`{"card_ids":[%q]}`, p.Card)}
		}, twin},
	}},
	"POST /projects/:project_id/boxes/batch": {ok: 200, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"POST", "/projects/" + p.Project + "/boxes/batch", fmt.Sprintf(`{"box_ids":[%q],"hydrate":true}`, p.Box)}
		}, twin},
		{"own project, acme's box ids", func(p ids) request {
			return request{"POST", "/projects/" + p.OwnProject + "/boxes/batch", fmt.Sprintf(`{"box_ids":[%q,%q],"hydrate":true}`, p.Box, p.OwnBox)}
		}, twin},
	}},
	"GET /projects/:project_id/boxes/:box_id": {ok: 200, variants: []variant{
		{"acme's project", func(p ids) request { return request{"GET", "/projects/" + p.Project + "/boxes/" + p.Box, ""} }, twin},
		{"own project, acme's box id", func(p ids) request { return request{"GET", "/projects/" + p.OwnProject + "/boxes/" + p.Box, ""} }, twin},
	}},
	"PUT /projects/:project_id/boxes/:box_id": {write: true, ok: 200, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"PUT", "/projects/" + p.Project + "/boxes/" + p.Box, fmt.Sprintf(`{"card_ids":[%q]}`, p.Card)}
		}, twin},
		{"own box, acme's card ids", func(p ids) request {
			return request{"PUT", "/projects/" + p.OwnProject + "/boxes/" + p.OwnBox, fmt.Sprintf(`{"card_ids":[%q]}`, p.Card)}
		}, twin},
		{"own project, acme's box id", func(p ids) request {
			return request{"PUT", "/projects/" + p.OwnProject + "/boxes/" + p.Box, fmt.Sprintf(`{"card_ids":[%q]}`, p.OwnCard)}
		}, own},
	}},
	"DELETE /projects/:project_id/boxes/:box_id": {write: true, ok: 204, variants: []variant{
		{"acme's project", func(p ids) request { return request{"DELETE", "/projects/" + p.Project + "/boxes/" + p.DoomedBox, ""} }, twin},
		{"own project, acme's box id", func(p ids) request {
			return request{"DELETE", "/projects/" + p.OwnProject + "/boxes/" + p.DoomedBox, ""}
		}, twin},
	}},
	"GET /projects/:project_id/boxes/:box_id/cards": {ok: 200, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"GET", "/projects/" + p.Project + "/boxes/" + p.Box + "/cards", ""}
		}, twin},
		{"own project, acme's box id", func(p ids) request {
			return request{"GET", "/projects/" + p.OwnProject + "/boxes/" + p.Box + "/cards", ""}
		}, twin},
	}},
	"POST /projects/:project_id/boxes/:box_id/append": {write: true, ok: 200, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"POST", "/projects/" + p.Project + "/boxes/" + p.Box + "/append", fmt.Sprintf(`{"card_ids":[%q]}`, p.Card)}
		}, twin},
		{"own project, acme's box id", func(p ids) request {
			return request{"POST", "/projects/" + p.OwnProject + "/boxes/" + p.Box + "/append", fmt.Sprintf(`{"card_ids":[%q]}`, p.OwnCard)}
		}, twin},
		{"own box, acme's card ids", func(p ids) request {
			return request{"POST", "/projects/" + p.OwnProject + "/boxes/" + p.OwnBox + "/append", fmt.Sprintf(`{"card_ids":[%q]}`, p.Card)}
		}, twin},
	}},

	// CXDB: the tenant is the key's.
	"GET /v1/contexts": {ok: 200, variants: []variant{
		{"label filter", func(p ids) request { return request{"GET", "/v1/contexts?label=" + url.QueryEscape(p.Label), ""} }, twin},
		{"title filter", func(p ids) request { return request{"GET", "/v1/contexts?title=" + url.QueryEscape(p.Title), ""} }, twin},
		{"client tag filter", func(p ids) request { return request{"GET", "/v1/contexts?tag=" + url.QueryEscape(p.Tag), ""} }, twin},
		{"query", func(p ids) request {
			return request{"GET", "/v1/contexts?include_provenance=true&q=" + url.QueryEscape(fmt.Sprintf("title = %q", p.Title)), ""}
		}, twin},
		{"all", func(p ids) request { return request{"GET", "/v1/contexts?limit=1000&include_provenance=true", ""} }, scope},
	}},
	"GET /v1/contexts/search": {ok: 200, variants: []variant{
		{"title", func(p ids) request {
			return request{"GET", "/v1/contexts/search?q=" + url.QueryEscape(fmt.Sprintf("title = %q", p.Title)), ""}
		}, twin},
		{"label", func(p ids) request {
			return request{"GET", "/v1/contexts/search?q=" + url.QueryEscape(fmt.Sprintf("label = %q", p.Label)), ""}
		}, twin},
		{"everything", func(p ids) request {
			return request{"GET", "/v1/contexts/search?q=" + url.QueryEscape("depth >= 0"), ""}
		}, scope},
	}},
	"POST /v1/contexts/create": {write: true, ok: 201, variants: []variant{
		{"acme's base turn", func(p ids) request {
			return request{"POST", "/v1/contexts/create", fmt.Sprintf(`{"base_turn_id":"%d"}`, p.Turn)}
		}, twin},
	}},
	"POST /v1/contexts/fork": {write: true, ok: 201, variants: []variant{
		{"acme's base turn", func(p ids) request {
			return request{"POST", "/v1/contexts/fork", fmt.Sprintf(`{"base_turn_id":"%d"}`, p.Turn)}
		}, twin},
	}},
	"GET /v1/contexts/:id": {ok: 200, variants: []variant{
		{"acme's context", func(p ids) request { return request{"GET", fmt.Sprintf("/v1/contexts/%d", p.Context), ""} }, twin},
		{"acme's fork", func(p ids) request { return request{"GET", fmt.Sprintf("/v1/contexts/%d", p.Fork), ""} }, twin},
	}},
	"GET /v1/contexts/:id/provenance": {ok: 200, variants: []variant{
		{"acme's context", func(p ids) request { return request{"GET", fmt.Sprintf("/v1/contexts/%d/provenance", p.Context), ""} }, twin},
	}},
	"GET /v1/contexts/:id/turns": {ok: 200, variants: []variant{
		{"acme's context", func(p ids) request {
			return request{"GET", fmt.Sprintf("/v1/contexts/%d/turns?view=both&limit=10", p.Context), ""}
		}, twin},
		{"own context, acme's turn as cursor", func(p ids) request {
			return request{"GET", fmt.Sprintf("/v1/contexts/%d/turns?before_turn_id=%d", p.OwnContext, p.Turn), ""}
		}, twin},
		{"own context, acme's type to filter", func(p ids) request {
			return request{"GET", fmt.Sprintf("/v1/contexts/%d/turns?type_id=%s", p.OwnContext, p.TypeID), ""}
		}, twin},
		{"own context, read as acme's type", func(p ids) request {
			return request{"GET", fmt.Sprintf("/v1/contexts/%d/turns?type_hint_mode=explicit&as_type_id=%s&as_type_version=1", p.OwnContext, p.TypeID), ""}
		}, twin},
	}},
	"POST /v1/contexts/:id/append": {write: true, ok: 201, variants: []variant{
		{"acme's context", func(p ids) request {
			return request{"POST", fmt.Sprintf("/v1/contexts/%d/append", p.Context), `{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"system"}}`}
		}, twin},
		{"own context, acme's parent turn", func(p ids) request {
			return request{"POST", fmt.Sprintf("/v1/contexts/%d/append", p.OwnContext),
				fmt.Sprintf(`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"system"},"parent_turn_id":"%d"}`, p.Turn)}
		}, twin},
	}},
	"PUT /v1/registry/bundles/:bundle_id": {write: true, ok: 204, variants: []variant{
		// acme's own put of its bundle again is 204 (unchanged); another
		// tenant's is 201, as for any fresh id: the id is per tenant.
		{"acme's bundle id", func(p ids) request {
			return request{"PUT", "/v1/registry/bundles/" + p.Bundle, bundleJSON(p.Bundle, p.TypeID, "string")}
		}, own},
		// Were registries shared, changing the field's type would be an
		// evolution conflict (409).
		{"acme's type with another field type", func(p ids) request {
			return request{"PUT", "/v1/registry/bundles/" + p.Bundle + "-2", bundleJSON(p.Bundle+"-2", p.TypeID, "u64")}
		}, own},
	}},
	"GET /v1/registry/bundles/:bundle_id": {ok: 200, variants: []variant{
		{"acme's bundle", func(p ids) request { return request{"GET", "/v1/registry/bundles/" + p.Bundle, ""} }, twin},
	}},
	"GET /v1/registry/types": {ok: 200, variants: fixed("GET", "/v1/registry/types")},
	"GET /v1/registry/types/:type_id/versions/:version": {ok: 200, variants: []variant{
		{"acme's type", func(p ids) request { return request{"GET", "/v1/registry/types/" + p.TypeID + "/versions/1", ""} }, twin},
	}},
	"GET /v1/registry/renderers": {ok: 200, variants: fixed("GET", "/v1/registry/renderers")},
	"GET /v1/blobs/:hash": {ok: 200, variants: []variant{
		{"acme's blob", func(p ids) request { return request{"GET", "/v1/blobs/" + p.Blob.String(), ""} }, twin},
		{"acme's tree", func(p ids) request { return request{"GET", "/v1/blobs/" + p.Tree.String(), ""} }, twin},
		{"acme's turn payload", func(p ids) request { return request{"GET", "/v1/blobs/" + p.Payload.String(), ""} }, twin},
	}},
	"GET /v1/turns/:id/fs": {ok: 200, variants: []variant{
		{"acme's turn", func(p ids) request { return request{"GET", fmt.Sprintf("/v1/turns/%d/fs", p.Turn), ""} }, twin},
	}},
	"GET /v1/turns/:id/fs/*": {ok: 200, variants: []variant{
		{"acme's file", func(p ids) request { return request{"GET", fmt.Sprintf("/v1/turns/%d/fs/%s", p.Turn, p.File), ""} }, twin},
		{"acme's file as JSON", func(p ids) request {
			return request{"GET", fmt.Sprintf("/v1/turns/%d/fs/%s?format=json", p.Turn, p.File), ""}
		}, twin},
	}},
	"GET /v1/events":  {ok: 200, variants: fixed("GET", "/v1/events")},
	"GET /v1/metrics": {ok: 200, variants: fixed("GET", "/v1/metrics")},
}

// fixed is the one request of a route that takes no ids.
func fixed(method, path string) []variant {
	return []variant{{"", func(ids) request { return request{method, path, ""} }, scope}}
}

// routeCase is a registered route and its case.
type routeCase struct {
	method, path string // as registered
	route
}

// name is the route as echo names it.
func (rc routeCase) name() string { return rc.method + " " + rc.path }

// requests are the route's variants built from p, with the route's
// method (an Any route's variants are built for GET).
func (rc routeCase) requests(p ids) []request {
	out := make([]request, len(rc.variants))
	for i, v := range rc.variants {
		out[i] = v.build(p)
		out[i].method = rc.method
	}
	return out
}

// registeredRoutes pairs every route the handler registered with its
// case; a route without one, or a case without its route, fails t.
func (h *hosted) registeredRoutes(t *testing.T) []routeCase {
	t.Helper()
	var out []routeCase
	seen := map[string]bool{}
	for _, r := range h.handler.Routes() {
		key := r.Method + " " + r.Path
		rt, ok := httpRoutes[key]
		if !ok {
			rt, ok = httpRoutes[allMethods+" "+r.Path]
			key = allMethods + " " + r.Path
		}
		if !ok {
			t.Errorf("route %s %s has no security case: add it to httpRoutes", r.Method, r.Path)
			continue
		}
		seen[key] = true
		out = append(out, routeCase{r.Method, r.Path, rt})
	}
	for key := range httpRoutes {
		if !seen[key] {
			t.Errorf("httpRoutes has %s, which is not registered", key)
		}
	}
	// Reads first, deletes last: acme's own writes run in this order.
	order := func(m string) int {
		switch m {
		case "GET":
			return 0
		case "DELETE":
			return 2
		}
		return 1
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := order(out[i].method), order(out[j].method); a != b {
			return a < b
		}
		return out[i].name() < out[j].name()
	})
	if len(out) < 30 {
		t.Fatalf("only %d routes registered", len(out))
	}
	return out
}

var volatile = regexp.MustCompile(`"(elapsed_ms|created_at|updated_at)":("[^"]*"|\d+)`)

// normalize blanks what differs between two requests made one after the
// other: the time a search took, the times things were created.
func normalize(b []byte) []byte { return volatile.ReplaceAll(b, []byte(`"$1":0`)) }

// TestHTTP tries every route with every credential: refused keys, keys of
// the wrong role, and another tenant's key with acme's ids, checking each
// answer and that nothing changed; then acme's own keys, which must work.
func TestHTTP(t *testing.T) {
	t.Parallel()
	h := newHosted(t)
	acme, asGlobex := h.seed(t)
	routes := h.registeredRoutes(t)

	t.Run("refused keys", func(t *testing.T) {
		for _, rc := range routes {
			t.Run(rc.name(), func(t *testing.T) {
				for i, r := range rc.requests(acme) {
					h.unchanged(t, "", func() { h.tryRefused(t, rc, r, i) })
				}
			})
		}
	})

	t.Run("roles", func(t *testing.T) {
		for _, rc := range routes {
			if rc.public {
				continue
			}
			t.Run(rc.name(), func(t *testing.T) {
				for _, r := range rc.requests(acme) {
					if rc.write || rc.admin {
						h.unchanged(t, "", func() {
							h.do(t, acmeReader, r).wantError(t, http.StatusForbidden, "FORBIDDEN")
						})
					}
					if rc.admin {
						h.unchanged(t, "", func() {
							h.do(t, acmeWriter, r).wantError(t, http.StatusForbidden, "FORBIDDEN")
							h.do(t, globexWriter, r).wantError(t, http.StatusForbidden, "FORBIDDEN")
						})
					}
				}
			})
		}
	})

	// acme's reads come before other tenants' requests: its caches (cards,
	// registries) are warm when those run, as on a server in use.
	t.Run("acme's reads", func(t *testing.T) {
		for _, rc := range routes {
			if !rc.write {
				t.Run(rc.name(), func(t *testing.T) {
					h.tryAcme(t, rc, acme)
					h.wantScopeProbes(t, rc, acme)
				})
			}
		}
	})

	// Requests that write into the caller's own namespace go last: what
	// they create must not make other variants' acme ids exist for globex.
	for _, phase := range []struct {
		name  string
		modes []mode
	}{{"other tenant", []mode{twin, scope}}, {"other tenant writing its own", []mode{own}}} {
		t.Run(phase.name, func(t *testing.T) {
			for _, rc := range routes {
				if rc.public || rc.admin {
					continue // the same for every key: tried above
				}
				t.Run(rc.name(), func(t *testing.T) {
					for _, v := range rc.variants {
						if slices.Contains(phase.modes, v.cross) {
							t.Run(v.name, func(t *testing.T) { h.tryOtherTenant(t, rc, v, acme, asGlobex) })
						}
					}
				})
			}
		})
	}

	t.Run("other tenant cannot tell acme is busy", func(t *testing.T) { h.tryBusyAcme(t, routes, asGlobex) })

	// Writes last, deletes after everything else (routes are in that
	// order).
	t.Run("acme's writes", func(t *testing.T) {
		for _, rc := range routes {
			if rc.write {
				t.Run(rc.name(), func(t *testing.T) { h.tryAcme(t, rc, acme) })
			}
		}
	})
}

// tryAcme sends the route's first variant with acme's own keys: its
// reader (reads only) and its writer, or its admin on admin routes. Each
// must get the route's ok status.
func (h *hosted) tryAcme(t *testing.T, rc routeCase, acme ids) {
	t.Helper()
	r := rc.requests(acme)[0]
	if !rc.write && !rc.admin {
		h.do(t, acmeReader, r).want(t, rc.ok)
	}
	c := acmeWriter
	if rc.admin {
		c = acmeAdmin
	}
	if res := h.do(t, c, r); rc.method == http.MethodGet || !rc.admin {
		res.want(t, rc.ok)
	} else if res.status == http.StatusUnauthorized || res.status == http.StatusForbidden {
		// pprof's other methods: any answer but a refusal.
		t.Fatalf("%s for an admin key: %d %s", rc.name(), res.status, res.body)
	}
}

// wantScopeProbes checks that the route's scope requests, sent by acme,
// show acme's markers: only then does their absence from another tenant's
// answer mean something. The event stream's first event and the metrics
// name nothing; tryBusyAcme watches them.
func (h *hosted) wantScopeProbes(t *testing.T, rc routeCase, acme ids) {
	t.Helper()
	if rc.public || rc.admin || rc.path == "/v1/events" || rc.path == "/v1/metrics" {
		return
	}
	for _, v := range rc.variants {
		if v.cross != scope {
			continue
		}
		body := h.do(t, acmeReader, v.build(acme)).want(t, http.StatusOK).body
		if !slices.ContainsFunc(acme.markers(), func(m string) bool { return bytes.Contains(body, []byte(m)) }) {
			t.Errorf("%s: acme's own answer shows none of its markers, so another tenant's proves nothing: %s", v.name, body)
		}
	}
}

// tryRefused sends r with every refused credential: 401 (with a
// WWW-Authenticate challenge) or 403 in the error shape, the same answer
// for every bad key (none says which is wrong), never the secret sent; a
// public route answers them all alike.
func (h *hosted) tryRefused(t *testing.T, rc routeCase, r request, variant int) {
	t.Helper()
	var public []byte
	bad := map[string][]cred{}
	for _, c := range refused {
		res := h.do(t, c.cred, r)
		if c.cred != noKey && bytes.Contains(res.body, []byte(h.secrets[c.cred])) {
			t.Errorf("%s: the answer holds the key sent: %s", c.cred, res.body)
		}
		if rc.public {
			res.want(t, rc.ok)
			if public != nil && !bytes.Equal(res.body, public) {
				t.Errorf("%s: public answer differs by key: %s", c.cred, res.body)
			}
			public = res.body
			continue
		}
		kind := map[int]string{401: "UNAUTHORIZED", 403: "FORBIDDEN"}[c.status]
		res.wantError(t, c.status, kind)
		if c.status == http.StatusUnauthorized {
			if ch := res.header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, "Bearer ") {
				t.Errorf("%s: 401 without a Bearer challenge (WWW-Authenticate %q)", c.cred, ch)
			}
			if c.cred != noKey {
				bad[string(res.body)] = append(bad[string(res.body)], c.cred)
			}
		}
	}
	if len(bad) > 1 {
		t.Errorf("variant %d: bad keys are told apart: %v", variant, bad)
	}
}

// tryOtherTenant sends variant v as globex with acme's ids and with ids
// that do not exist: the answers must be the same, byte for byte once the
// ids are swapped, and nothing of acme's may change (nothing at all,
// unless the request writes into globex's own namespace).
func (h *hosted) tryOtherTenant(t *testing.T, rc routeCase, v variant, acme, asGlobex ids) {
	t.Helper()
	r := v.build(asGlobex)
	r.method = rc.method
	changes := ""
	if v.cross == own {
		changes = "acme"
	}
	if v.cross == scope {
		h.unchanged(t, changes, func() {
			res := h.do(t, globexWriter, r).want(t, http.StatusOK)
			h.wantNothingOf(t, acme, res.body)
		})
		return
	}
	missing := asGlobex.missing()
	m := v.build(missing)
	m.method = rc.method
	h.unchanged(t, changes, func() {
		got := h.do(t, globexWriter, r)
		want := h.do(t, globexWriter, m)
		if got.status != want.status || !bytes.Equal(normalize(got.body), normalize(rename(want.body, asGlobex.renames(missing)))) {
			t.Errorf("acme's ids are told from ids that do not exist:\nacme's:  %d %s\nmissing: %d %s", got.status, got.body, want.status, want.body)
		}
		if want.status == http.StatusBadRequest && !namesAny(want.body, asGlobex.renames(missing)) {
			// A 400 that names none of the ids is about the request's
			// form: the ids were never looked at.
			t.Errorf("the request is malformed, so it proves nothing: %s", want.body)
		}
	})
}

// namesAny reports whether an answer names one of the missing ids.
func namesAny(body []byte, renames [][2]string) bool {
	for _, r := range renames {
		if bytes.Contains(body, []byte(r[0])) {
			return true
		}
	}
	return false
}

// wantNothingOf fails t if an answer to another tenant holds anything of
// acme's: one of its markers, or one of its context ids.
func (h *hosted) wantNothingOf(t *testing.T, acme ids, body []byte) {
	t.Helper()
	for _, m := range acme.markers() {
		if bytes.Contains(body, []byte(m)) {
			t.Errorf("the answer holds acme's %q: %s", m, body)
		}
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return
	}
	for _, id := range contextIDs(v) {
		if id == fmt.Sprint(acme.Context) || id == fmt.Sprint(acme.Fork) {
			t.Errorf("the answer holds acme's context %s: %s", id, body)
		}
	}
}

// contextIDs collects every "context_id" member of a JSON value.
func contextIDs(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == "context_id" {
				out = append(out, fmt.Sprint(x))
			}
			out = append(out, contextIDs(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, contextIDs(x)...)
		}
	}
	return out
}

// tryBusyAcme: what another tenant sees without naming acme's ids (its
// listings, registry, event stream and metrics) does not change while
// acme works on every surface.
func (h *hosted) tryBusyAcme(t *testing.T, routes []routeCase, asGlobex ids) {
	var watched []request
	for _, rc := range routes {
		for _, v := range rc.variants {
			if !rc.public && !rc.admin && v.cross == scope {
				watched = append(watched, v.build(asGlobex))
			}
		}
	}
	before := make([][]byte, len(watched))
	for i, r := range watched {
		before[i] = observed(t, r, h.do(t, globexWriter, r))
	}
	h.busyAcme(t)
	for i, r := range watched {
		after := observed(t, r, h.do(t, globexWriter, r))
		if strings.HasPrefix(r.path, "/v1/metrics") {
			// LEAK (issue 9): GET /v1/metrics reports the whole server's
			// counts to every tenant (contexts, turns and blobs, the data
			// files' sizes, binary sessions), so globex watches acme work.
			// When the figures become per tenant, require equality here.
			if bytes.Equal(after, before[i]) {
				t.Errorf("%s: other tenants' activity no longer shows (the leak is fixed?): make this case require equality", r.path)
			}
			continue
		}
		if !bytes.Equal(after, before[i]) {
			t.Errorf("%s %s changes with acme's activity:\nbefore %s\nafter  %s", r.method, r.path, before[i], after)
		}
	}
}

// observed is the part of an answer that must not follow another
// tenant's activity: all of it, but for a search's time, the event
// stream's first event, and the store's figures of /v1/metrics (the rest
// is the process's and the clock's).
func observed(t *testing.T, r request, res response) []byte {
	t.Helper()
	res.want(t, http.StatusOK)
	if !strings.HasPrefix(r.path, "/v1/metrics") {
		return normalize(res.body)
	}
	var m struct {
		Objects, Storage json.RawMessage
		Sessions         struct{ Total, Active, Idle int }
	}
	res.json(t, &m)
	var storage map[string]any
	if err := json.Unmarshal(m.Storage, &storage); err != nil {
		t.Fatal(err)
	}
	delete(storage, "data_dir_free_bytes") // the disk's, shared with everything on it
	out, _ := json.Marshal([]any{m.Objects, storage, m.Sessions.Total})
	return out
}

// busyAcme makes acme work on every surface: a new binary session (left
// open), a context, a turn, a blob, a card and a bundle.
func (h *hosted) busyAcme(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c := h.client(t, client.WithClientTag("acme-busy;key="+h.secrets[acmeWriter]))
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: head.ContextID, TypeID: "com.acme.SecretNote", TypeVersion: 1, Payload: []byte("busy")}); err != nil {
		t.Fatal(err)
	}
	putBlob(t, c, []byte("acme's busy blob"))
	h.do(t, acmeWriter, request{"POST", "/projects/acme/cards", `{"cards":[` + cardJSON("acme-busy-card", "busy") + `]}`}).want(t, http.StatusCreated)
	h.do(t, acmeWriter, request{"PUT", "/v1/registry/bundles/acme-busy-bundle", bundleJSON("acme-busy-bundle", "com.acme.BusyNote", "string")}).want(t, http.StatusCreated)
}
