package securitytest_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"testing"

	"github.com/cardboxhq/cardbox/cardbox/rules"
)

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
	// admin: administration, tried with the operator key (the tenant
	// admins' narrower reach is TestAdminScopes').
	admin bool
	write bool // reader keys get 403
	// ok is the status of the first variant for acme's writer (the
	// operator, for admin routes): proof that the request is valid and its ids real,
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
	// Tenant and key administration (the operator; tenant admins in
	// TestAdminScopes).
	"POST /admin/tenants": {admin: true, ok: 201, variants: fixed("POST", "/admin/tenants", `{"tenant_id":"initech","name":"Initech"}`)},
	"GET /admin/tenants":  {admin: true, ok: 200, variants: fixed("GET", "/admin/tenants")},
	"GET /admin/usage":    {admin: true, ok: 200, variants: fixed("GET", "/admin/usage")},
	// Back to the server's defaults: nothing the other cases see changes.
	"PUT /admin/tenants/:tenant_id/quota":     {admin: true, ok: 200, variants: fixed("PUT", "/admin/tenants/globex/quota", `{"bytes":0}`)},
	"PUT /admin/tenants/:tenant_id/rate":      {admin: true, ok: 200, variants: fixed("PUT", "/admin/tenants/globex/rate", `{"per_sec":0,"burst":0}`)},
	"PUT /admin/tenants/:tenant_id/retention": {admin: true, ok: 200, variants: fixed("PUT", "/admin/tenants/globex/retention", `{"max_age":"3650d"}`)},
	"GET /admin/tenants/:tenant_id/retention": {admin: true, ok: 200, variants: fixed("GET", "/admin/tenants/globex/retention")},
	// A tenant no case creates: acme and the others outlive the suite.
	"DELETE /admin/tenants/:tenant_id": {admin: true, ok: 404, variants: fixed("DELETE", "/admin/tenants/nobody")},
	"POST /admin/keys":                 {admin: true, ok: 201, variants: fixed("POST", "/admin/keys", `{"tenant_id":"initech","role":"reader"}`)},
	"GET /admin/keys":                  {admin: true, ok: 200, variants: fixed("GET", "/admin/keys")},
	"DELETE /admin/keys/:key_id":       {admin: true, ok: 404, variants: fixed("DELETE", "/admin/keys/key_0000000000000000")},
	"GET /admin/audit":                 {admin: true, ok: 200, variants: fixed("GET", "/admin/audit")},
	// Service-wide work on the store; no compaction has the id asked.
	"POST /admin/compactions":    {admin: true, ok: 202, variants: fixed("POST", "/admin/compactions")},
	"GET /admin/compactions/:id": {admin: true, ok: 404, variants: fixed("GET", "/admin/compactions/999999")},
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

	// Context assembly.
	"GET /projects/:project_id/cards": {ok: 200, variants: []variant{
		{"acme's content hash", func(p ids) request {
			return request{"GET", "/projects/" + p.OwnProject + "/cards?content_hash=" + contentHash("acme's secret card 1"), ""}
		}, scope},
	}},
	"GET /projects/:project_id/boxes/:box_id/entries":   boxRead(""),
	"GET /projects/:project_id/boxes/:box_id/snapshots": boxRead("/snapshots"),
	"GET /projects/:project_id/boxes/:box_id/snapshots/:snapshot_id": {ok: 200, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"GET", "/projects/" + p.Project + "/boxes/" + p.Box + "/snapshots/" + p.Snapshot, ""}
		}, twin},
		{"own project, acme's box and snapshot ids", func(p ids) request {
			return request{"GET", "/projects/" + p.OwnProject + "/boxes/" + p.Box + "/snapshots/" + p.Snapshot, ""}
		}, twin},
	}},
	"GET /projects/:project_id/boxes/:box_id/snapshots/:snapshot_id/diff": {ok: 200, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"GET", "/projects/" + p.Project + "/boxes/" + p.Box + "/snapshots/" + p.Snapshot + "/diff", ""}
		}, twin},
		{"own project, acme's box and snapshot ids", func(p ids) request {
			return request{"GET", "/projects/" + p.OwnProject + "/boxes/" + p.Box + "/snapshots/" + p.Snapshot + "/diff", ""}
		}, twin},
	}},
	"POST /projects/:project_id/boxes/:box_id/assemble": {ok: 200, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"POST", "/projects/" + p.Project + "/boxes/" + p.Box + "/assemble", `{"budget":1000,"tokenizer":"cl100k_base"}`}
		}, twin},
		{"own project, acme's box id", func(p ids) request {
			return request{"POST", "/projects/" + p.OwnProject + "/boxes/" + p.Box + "/assemble", `{"budget":1000,"tokenizer":"cl100k_base"}`}
		}, twin},
	}},
	"POST /projects/:project_id/boxes/:box_id/entries": {write: true, ok: 201, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"POST", "/projects/" + p.Project + "/boxes/" + p.Box + "/entries", fmt.Sprintf(`{"card_ids":[%q]}`, p.Card)}
		}, twin},
		{"own project, acme's box id", func(p ids) request {
			return request{"POST", "/projects/" + p.OwnProject + "/boxes/" + p.Box + "/entries", fmt.Sprintf(`{"card_ids":[%q]}`, p.OwnCard)}
		}, twin},
		{"own box, acme's card ids", func(p ids) request {
			return request{"POST", "/projects/" + p.OwnProject + "/boxes/" + p.OwnBox + "/entries", fmt.Sprintf(`{"card_ids":[%q]}`, p.Card)}
		}, twin},
	}},
	"PATCH /projects/:project_id/boxes/:box_id/entries/:entry_id":  boxWrite("PATCH", "/entries/e1", `{"draft":false}`, 200),
	"DELETE /projects/:project_id/boxes/:box_id/entries/:entry_id": boxWrite("DELETE", "/entries/e1", "", 204),
	"POST /projects/:project_id/boxes/:box_id/reorder":             boxWrite("POST", "/reorder", `{"zone":"stable","entry_ids":[]}`, 200),
	"POST /projects/:project_id/boxes/:box_id/snapshots":           boxWrite("POST", "/snapshots", `{}`, 201),
	"POST /projects/:project_id/boxes/:box_id/restore": {write: true, ok: 200, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"POST", "/projects/" + p.Project + "/boxes/" + p.Box + "/restore", fmt.Sprintf(`{"snapshot_id":%q}`, p.Snapshot)}
		}, twin},
		{"own box, acme's box and snapshot ids", func(p ids) request {
			return request{"POST", "/projects/" + p.OwnProject + "/boxes/" + p.OwnBox + "/restore",
				fmt.Sprintf(`{"snapshot_id":%q,"from_box_id":%q}`, p.Snapshot, p.Box)}
		}, twin},
	}},
	"POST /projects/:project_id/boxes/:box_id/derive": {write: true, ok: 200, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{"POST", "/projects/" + p.Project + "/boxes/" + p.DoomedBox + "/derive", fmt.Sprintf(`{"from_box_id":%q}`, p.Box)}
		}, twin},
		{"own box from acme's box", func(p ids) request {
			return request{"POST", "/projects/" + p.OwnProject + "/boxes/" + p.OwnBox + "/derive", fmt.Sprintf(`{"from_box_id":%q}`, p.Box)}
		}, twin},
		{"own box from acme's context", func(p ids) request {
			return request{"POST", "/projects/" + p.OwnProject + "/boxes/" + p.OwnBox + "/derive", fmt.Sprintf(`{"context_id":"%d"}`, p.Context)}
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
	"DELETE /v1/contexts/:id": {write: true, ok: 204, variants: []variant{
		{"acme's context", func(p ids) request { return request{"DELETE", fmt.Sprintf("/v1/contexts/%d", p.DoomedContext), ""} }, twin},
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
	// Asked of acme's hashes, another tenant hears them missing, as of
	// hashes nobody stored.
	"POST /v1/blobs/missing": {ok: 200, variants: []variant{
		{"acme's blobs", func(p ids) request {
			return request{"POST", "/v1/blobs/missing", `{"hashes":["` + p.Blob.String() + `","` + p.Tree.String() + `","` + p.Payload.String() + `"]}`}
		}, twin},
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
// fixed is a route's one request, the same whoever asks (body optional).
func fixed(method, path string, body ...string) []variant {
	b := ""
	if len(body) > 0 {
		b = body[0]
	}
	return []variant{{"", func(ids) request { return request{method, path, b} }, scope}}
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

// boxRead is a read of a box's sub-resource at suffix: in acme's project,
// and in the caller's own under acme's box id.
func boxRead(suffix string) route {
	if suffix == "" {
		suffix = "/entries"
	}
	return route{ok: 200, variants: []variant{
		{"acme's project", func(p ids) request { return request{"GET", "/projects/" + p.Project + "/boxes/" + p.Box + suffix, ""} }, twin},
		{"own project, acme's box id", func(p ids) request {
			return request{"GET", "/projects/" + p.OwnProject + "/boxes/" + p.Box + suffix, ""}
		}, twin},
	}}
}

// boxWrite is a write to acme's box at suffix, and the same in the
// caller's own project under acme's box id.
func boxWrite(method, suffix, body string, ok int) route {
	return route{write: true, ok: ok, variants: []variant{
		{"acme's project", func(p ids) request {
			return request{method, "/projects/" + p.Project + "/boxes/" + p.Box + suffix, body}
		}, twin},
		{"own project, acme's box id", func(p ids) request {
			return request{method, "/projects/" + p.OwnProject + "/boxes/" + p.Box + suffix, body}
		}, twin},
	}}
}

// contentHash is the hex content hash of a card whose content is the
// JSON string s.
func contentHash(s string) string {
	b, _ := json.Marshal(s)
	h, _ := rules.ContentHash(b)
	return hex.EncodeToString(h)
}
