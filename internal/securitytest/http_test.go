package securitytest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
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

var volatile = regexp.MustCompile(`"(elapsed_ms|created_at|updated_at)":("[^"]*"|\d+)`)

// normalize blanks what differs between two requests made one after the
// other: the time a search took, the times things were created.
func normalize(b []byte) []byte { return volatile.ReplaceAll(b, []byte(`"$1":0`)) }

// TestHTTP tries every route with every credential: refused keys, keys of
// the wrong role, and another tenant's key with acme's ids, checking each
// answer and that nothing changed. acme's own keys must work, and prove
// that the requests are valid and their ids real; their reads come
// first, their writes last. Between them, another tenant watches acme
// work and must see nothing change.
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
					} else {
						// Operators administer the service and touch no
						// tenant's data.
						h.unchanged(t, "", func() {
							h.do(t, operator, r).wantError(t, http.StatusForbidden, "FORBIDDEN")
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

// tryAcme sends the route's first variant with acme's own keys, its
// reader (reads only) and its writer, or with the operator's on admin
// routes. Each must get the route's ok status.
func (h *hosted) tryAcme(t *testing.T, rc routeCase, acme ids) {
	t.Helper()
	r := rc.requests(acme)[0]
	if !rc.write && !rc.admin {
		h.do(t, acmeReader, r).want(t, rc.ok)
	}
	c := acmeWriter
	if rc.admin {
		c = operator
	}
	if res := h.do(t, c, r); rc.method == http.MethodGet || !rc.admin {
		res.want(t, rc.ok)
	} else if res.status == http.StatusUnauthorized || res.status == http.StatusForbidden {
		// pprof's other methods: any answer but a refusal.
		t.Fatalf("%s for the operator key: %d %s", rc.name(), res.status, res.body)
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
	t.Helper()
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
