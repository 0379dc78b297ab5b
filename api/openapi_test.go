package api_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/docs"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// TestOpenAPIIsValid checks that docs/openapi.yaml is a valid OpenAPI 3
// document: structure, references, path parameters, and every example
// against its schema; and that operation ids are unique.
func TestOpenAPIIsValid(t *testing.T) {
	doc := apitest.OpenAPIDoc(t)
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi: %q, want 3.x", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("docs/openapi.yaml is not valid OpenAPI 3: %v", err)
	}
	seen := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", where)
			} else if other, dup := seen[op.OperationID]; dup {
				t.Errorf("operationId %q of %s is %s's too", op.OperationID, where, other)
			}
			seen[op.OperationID] = where
		}
	}
}

// newHostedServer is the HTTP handler of the daemon cardboxd runs, in
// hosted mode with everything that registers routes: the CardBox, CXDB
// and admin route groups, /metrics and the profiler.
func newHostedServer(t testing.TB) (*api.Handler, string) {
	t.Helper()
	d := daemontest.New(t, func(c *daemon.Config) {
		c.Mode, c.Pprof, c.HTTPBodyLimit = daemon.ModeHosted, true, apitest.BodyLimit
	})
	return d.Handler(), "http://" + d.HTTPAddr()
}

// openAPIMethods are the methods an OpenAPI 3 path item can describe.
var openAPIMethods = map[string]bool{
	http.MethodGet: true, http.MethodPut: true, http.MethodPost: true, http.MethodDelete: true,
	http.MethodOptions: true, http.MethodHead: true, http.MethodPatch: true, http.MethodTrace: true,
}

// TestOpenAPIDocumentsEveryRoute checks that every route the server
// registers (hosted mode, every route group, /metrics and the profiler)
// is documented and every documented operation is registered; that the
// routes wanting no key are the documented ones (security: []); and that
// GET /openapi.yaml serves the document.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	h, base := newHostedServer(t)
	doc := apitest.OpenAPIDoc(t)
	documented := map[string]*openapi3.Operation{}
	documentedPaths := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		documentedPaths[path] = true
		for method, op := range item.Operations() {
			documented[method+" "+path] = op
		}
	}
	served := map[string]bool{}
	for _, r := range h.Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		path := echoToOpenAPI(r.Path)
		if !openAPIMethods[r.Method] {
			// Echo's Any also registers CONNECT, PROPFIND and REPORT,
			// which OpenAPI cannot name: the path must be documented.
			if !documentedPaths[path] {
				t.Errorf("served only: %s %s (and its path is not documented)", r.Method, path)
			}
			continue
		}
		served[r.Method+" "+path] = true
	}
	inDoc := map[string]bool{}
	for k := range documented {
		inDoc[k] = true
	}
	if diff := symmetricDiff(served, inDoc); len(diff) > 0 {
		t.Errorf("the router and docs/openapi.yaml differ:\n%s", strings.Join(diff, "\n"))
	}

	// Without a key, hosted mode answers 401 on every route but the
	// documented public ones.
	for _, route := range sortedKeys(served) {
		op := documented[route]
		if op == nil {
			continue
		}
		method, path, _ := strings.Cut(route, " ")
		public := op.Security != nil && len(*op.Security) == 0
		req, err := http.NewRequest(method, base+samplePath(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", route, err)
		}
		res.Body.Close()
		if got := res.StatusCode == http.StatusUnauthorized; got == public {
			t.Errorf("%s without a key: status %d, but the document says security %s", route, res.StatusCode, securityOf(op, doc))
		}
	}

	res, err := http.Get(base + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Equal(body, docs.OpenAPI) {
		t.Errorf("GET /openapi.yaml: status %d, does not serve docs/openapi.yaml", res.StatusCode)
	}
}

func securityOf(op *openapi3.Operation, doc *openapi3.T) string {
	if op.Security != nil {
		b, _ := json.Marshal(op.Security)
		return string(b)
	}
	b, _ := json.Marshal(doc.Security)
	return string(b) + " (the document's)"
}

// samplePath fills an OpenAPI path's parameters with "1".
func samplePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			segs[i] = "1"
		}
	}
	return strings.Join(segs, "/")
}

// echoToOpenAPI turns echo's /a/:b into /a/{b}, and a trailing * (the
// rest of the path) into {path}.
func echoToOpenAPI(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		switch {
		case strings.HasPrefix(s, ":"):
			segs[i] = "{" + s[1:] + "}"
		case s == "*":
			segs[i] = "{path}"
		}
	}
	return strings.Join(segs, "/")
}

func symmetricDiff(a, b map[string]bool) []string {
	var out []string
	for k := range a {
		if !b[k] {
			out = append(out, "served only: "+k)
		}
	}
	for k := range b {
		if !a[k] {
			out = append(out, "documented only: "+k)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIDescribesCXDBAnswers drives the CXDB HTTP API (dev mode)
// through its success and error answers and checks every exchange against
// the document.
func TestOpenAPIDescribesCXDBAnswers(t *testing.T) {
	h := apitest.NewCXDB(t)
	d := apitest.NewDocCheck(t, h.URL)
	bundle := "/v1/registry/bundles/" + registry.ConversationBundleID
	d.Call(http.StatusCreated, http.MethodPut, bundle, registry.ConversationBundle)
	d.Call(http.StatusNoContent, http.MethodPut, bundle, registry.ConversationBundle)
	d.Call(http.StatusUnprocessableEntity, http.MethodPut, "/v1/registry/bundles/other", registry.ConversationBundle)
	etag := d.Call(http.StatusOK, http.MethodGet, bundle, nil).Header.Get("ETag")
	d.Call(http.StatusNotModified, http.MethodGet, bundle, nil, "If-None-Match", etag)
	d.Call(http.StatusNotFound, http.MethodGet, "/v1/registry/bundles/nope", nil)
	d.Call(http.StatusOK, http.MethodGet, "/v1/registry/types", nil)
	d.Call(http.StatusOK, http.MethodGet, "/v1/registry/types/cxdb.ConversationItem/versions/3", nil)
	d.Call(http.StatusNotFound, http.MethodGet, "/v1/registry/types/cxdb.ConversationItem/versions/99", nil)
	d.Call(http.StatusOK, http.MethodGet, "/v1/registry/renderers", nil)

	var created struct {
		ContextID string `json:"context_id"`
	}
	d.Call(http.StatusCreated, http.MethodPost, "/v1/contexts/create", nil)
	d.Call(http.StatusCreated, http.MethodPost, "/v1/contexts/create", `{"base_turn_id":"0"}`).JSON(t, &created)
	d.Call(http.StatusBadRequest, http.MethodPost, "/v1/contexts/create", `{"base":1}`)
	ctx := "/v1/contexts/" + created.ContextID
	item := `{"item_type":"user_input","status":"complete","timestamp":"2023-11-14T22:13:20+00:00","user_input":{"text":"hello","files":["a.txt"]}}`
	var appended struct {
		TurnID string `json:"turn_id"`
	}
	d.Call(http.StatusCreated, http.MethodPost, ctx+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":`+item+`,"idempotency_key":"k"}`).JSON(t, &appended)
	d.Call(http.StatusCreated, http.MethodPost, ctx+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":`+item+`,"idempotency_key":"k"}`)
	d.Call(http.StatusCreated, http.MethodPost, ctx+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"system"},"parent_turn_id":`+appended.TurnID+`}`)
	d.Call(http.StatusUnprocessableEntity, http.MethodPost, ctx+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":7}}`)
	d.Call(http.StatusBadRequest, http.MethodPost, ctx+"/append", `{"type_version":3}`)
	d.Call(http.StatusConflict, http.MethodPost, ctx+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"system"},"if_head":"0"}`)
	d.Call(http.StatusNotFound, http.MethodPost, "/v1/contexts/999999/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{}}`)
	d.Call(http.StatusCreated, http.MethodPost, "/v1/contexts/fork", `{"base_turn_id":"`+appended.TurnID+`"}`)
	d.Call(http.StatusCreated, http.MethodPost, "/v1/contexts/fork", `{"base_turn_id":`+appended.TurnID+`}`)
	d.Call(http.StatusBadRequest, http.MethodPost, "/v1/contexts/fork", `{}`)
	d.Call(http.StatusNotFound, http.MethodPost, "/v1/contexts/fork", `{"base_turn_id":"999999"}`)

	// A chain whose first turn carries context metadata and provenance.
	var meta struct {
		ContextID string `json:"context_id"`
	}
	d.Call(http.StatusCreated, http.MethodPost, "/v1/contexts/create", nil).JSON(t, &meta)
	d.Call(http.StatusCreated, http.MethodPost, "/v1/contexts/"+meta.ContextID+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"system","context_metadata":{"client_tag":"agent","title":"Docs","labels":["a","b"],`+
			`"provenance":{"parent_context_id":"`+created.ContextID+`","spawn_reason":"test","process_pid":42,"env":{"K":"V"},"captured_at":"2023-11-14T22:13:20Z"}}}}`)
	waitfor.Soon(t, "the context's metadata", func() bool {
		var e struct{ Title string }
		json.Unmarshal(h.Get("/v1/contexts/"+meta.ContextID).Body, &e)
		return e.Title == "Docs"
	})
	d.Call(http.StatusOK, http.MethodGet, "/v1/contexts/"+meta.ContextID, nil)
	d.Call(http.StatusOK, http.MethodGet, "/v1/contexts/"+meta.ContextID+"/provenance", nil)
	d.Call(http.StatusOK, http.MethodGet, "/v1/contexts?include_provenance=true&label=a&tag=agent", nil)
	d.Call(http.StatusOK, http.MethodGet, "/v1/contexts/search?q="+url.QueryEscape(`title = "Docs"`), nil)

	d.Call(http.StatusOK, http.MethodGet, "/v1/contexts", nil)
	d.Call(http.StatusOK, http.MethodGet, "/v1/contexts?limit=1&include_provenance=1&label=a&label=b&title=x", nil)
	d.Call(http.StatusOK, http.MethodGet, "/v1/contexts?tag=&q="+url.QueryEscape(`depth > 0`), nil)
	d.Call(http.StatusBadRequest, http.MethodGet, "/v1/contexts?limit=x", nil)
	d.Call(http.StatusOK, http.MethodGet, "/v1/contexts/search?q="+url.QueryEscape(`depth >= 1`)+"&limit=5", nil)
	d.Call(http.StatusBadRequest, http.MethodGet, "/v1/contexts/search", nil)
	d.Call(http.StatusBadRequest, http.MethodGet, "/v1/contexts/search?q="+url.QueryEscape(`depth >`), nil)
	d.Call(http.StatusBadRequest, http.MethodGet, "/v1/contexts/search?q="+url.QueryEscape(`nosuchfield = 1`), nil)
	d.Call(http.StatusBadRequest, http.MethodGet, "/v1/contexts/search?q=depth%3E0&limit=x", nil)
	d.Call(http.StatusOK, http.MethodGet, ctx, nil)
	d.Call(http.StatusOK, http.MethodGet, ctx+"/provenance", nil)
	d.Call(http.StatusNotFound, http.MethodGet, "/v1/contexts/999999", nil)
	d.Call(http.StatusBadRequest, http.MethodGet, "/v1/contexts/abc", nil)
	d.Call(http.StatusNotFound, http.MethodGet, "/v1/contexts/999999/provenance", nil)

	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	d.Call(http.StatusOK, http.MethodGet, ctx+"/turns?limit=1", nil).JSON(t, &page)
	d.Call(http.StatusOK, http.MethodGet, ctx+"/turns?limit=1&cursor="+page.NextCursor, nil)
	d.Call(http.StatusOK, http.MethodGet, ctx+"/turns?view=both&include_unknown=1&u64_format=number&enum_render=both&time_render=unix_ms", nil)
	d.Call(http.StatusOK, http.MethodGet, ctx+"/turns?view=raw&bytes_render=hex", nil)
	d.Call(http.StatusOK, http.MethodGet, ctx+"/turns?view=raw&bytes_render=len_only&type_id=cxdb.ConversationItem&type_version=3", nil)
	d.Call(http.StatusOK, http.MethodGet, ctx+"/turns?type_hint_mode=explicit&as_type_id=cxdb.UserInput&as_type_version=1", nil)
	d.Call(http.StatusOK, http.MethodGet, ctx+"/turns?before_turn_id="+appended.TurnID, nil)
	d.Call(http.StatusBadRequest, http.MethodGet, ctx+"/turns?view=nope", nil)
	d.Call(http.StatusBadRequest, http.MethodGet, ctx+"/turns?limit=10001", nil)
	d.Call(http.StatusNotFound, http.MethodGet, "/v1/contexts/999999/turns", nil)

	// A turn of an unregistered type renders with a per-turn error; fs
	// snapshots and blobs come over the binary protocol.
	c := h.Client()
	basic, _ := apitest.UploadBasicTree(t, c)
	head, err := c.CreateContext(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	turn, err := c.AppendTurn(context.Background(), &client.AppendRequest{
		ContextID: head.ContextID, TypeID: "unregistered", TypeVersion: 1, Payload: []byte{0x80}, FSRootHash: &basic,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.Call(http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/contexts/%d/turns", head.ContextID), nil)
	fs := fmt.Sprintf("/v1/turns/%d/fs", turn.NewTurnID)
	d.Call(http.StatusOK, http.MethodGet, fs, nil)
	d.Call(http.StatusOK, http.MethodGet, fs+"?path=src", nil)
	d.Call(http.StatusUnprocessableEntity, http.MethodGet, fs+"?path=README.md", nil)
	d.Call(http.StatusNotFound, http.MethodGet, fs+"?path=nope", nil)
	d.Call(http.StatusOK, http.MethodGet, fs+"/src/lib.go", nil)
	d.Call(http.StatusOK, http.MethodGet, fs+"/README.md?format=json", nil)
	d.Call(http.StatusOK, http.MethodGet, fs+"/src", nil)
	d.Call(http.StatusNotFound, http.MethodGet, "/v1/turns/999999/fs", nil)
	d.Call(http.StatusBadRequest, http.MethodGet, "/v1/turns/abc/fs", nil)
	d.Call(http.StatusOK, http.MethodGet, "/v1/blobs/"+hex.EncodeToString(basic[:]), nil)
	d.Call(http.StatusNotFound, http.MethodGet, "/v1/blobs/"+strings.Repeat("0", 64), nil)
	d.Call(http.StatusBadRequest, http.MethodGet, "/v1/blobs/xyz", nil)
	d.Call(http.StatusOK, http.MethodPost, "/v1/blobs/missing", `{"hashes":["`+hex.EncodeToString(basic[:])+`","`+strings.Repeat("0", 64)+`"]}`)
	d.Call(http.StatusBadRequest, http.MethodPost, "/v1/blobs/missing", `{"hashes":["xyz"]}`)
	d.Call(http.StatusOK, http.MethodGet, "/v1/metrics", nil)

	// The event stream: its status and content type.
	s := h.Events("")
	r := apitest.Response{Status: s.HTTP().StatusCode, Header: s.HTTP().Header}
	if err := d.Check(s.HTTP().Request, r, true); err != nil {
		t.Errorf("GET /v1/events: does not match docs/openapi.yaml: %v", err)
	}
	s.Until("connected")
}

// TestOpenAPIDescribesCardBoxAnswers checks CardBox exchanges, /healthz
// and /openapi.yaml against the document with kin-openapi (the CardBox
// tests check every answer they get with the harness's own validator).
func TestOpenAPIDescribesCardBoxAnswers(t *testing.T) {
	h := apitest.NewCardBox(t)
	d := apitest.NewDocCheck(t, h.URL)
	d.Call(http.StatusOK, http.MethodGet, "/healthz", nil)
	d.Call(http.StatusOK, http.MethodGet, "/openapi.yaml", nil)
	p := "/projects/p1"
	d.Call(http.StatusCreated, http.MethodPost, p+"/cards", map[string]any{"cards": []any{
		apitest.Card("c1", "task.instruction", "one"), apitest.Card("c2", "agent.thought", "two"),
	}})
	d.Call(http.StatusCreated, http.MethodPost, p+"/cards", map[string]any{
		"card_id": "c3", "content": map[string]any{"x": 1}, "metadata": map[string]any{"type": "tool.call", "role": "assistant"},
		"tool_calls": []any{map[string]any{"id": "t1"}}, "ttl_seconds": 60,
	})
	d.Call(http.StatusConflict, http.MethodPost, p+"/cards", apitest.Card("c1", "task.instruction", "changed"))
	d.Call(http.StatusBadRequest, http.MethodPost, p+"/cards", `{"cards":[{"metadata":{"type":"task.instruction"},"nope":1}]}`)
	d.Call(http.StatusOK, http.MethodGet, p+"/cards/c1", nil)
	d.Call(http.StatusNotFound, http.MethodGet, p+"/cards/none", nil)
	d.Call(http.StatusOK, http.MethodPost, p+"/cards/batch", `{"card_ids":["c1","none"]}`)
	var box struct {
		BoxID string `json:"box_id"`
	}
	d.Call(http.StatusCreated, http.MethodPost, p+"/boxes", `{"card_ids":["c1"],"metadata":{"k":"v"}}`).JSON(t, &box)
	d.Call(http.StatusUnprocessableEntity, http.MethodPost, p+"/boxes", `{"card_ids":["none"]}`)
	d.Call(http.StatusOK, http.MethodPut, p+"/boxes/b2", `{"card_ids":["c1","c2"],"parent_ids":["`+box.BoxID+`"]}`)
	d.Call(http.StatusOK, http.MethodGet, p+"/boxes/b2", nil)
	d.Call(http.StatusOK, http.MethodPost, p+"/boxes/b2/append", `{"card_ids":["c3"]}`)
	d.Call(http.StatusOK, http.MethodPost, p+"/boxes/b2/append?return=box", `{"card_ids":["c3"]}`)
	d.Call(http.StatusOK, http.MethodGet, p+"/boxes/b2/cards?limit=2", nil)
	d.Call(http.StatusOK, http.MethodPost, p+"/boxes/batch", `{"box_ids":["b2","none"],"hydrate":true,"limit":10}`)
	d.Call(http.StatusNoContent, http.MethodDelete, p+"/boxes/b2", nil)
	d.Call(http.StatusNotFound, http.MethodGet, p+"/boxes/b2", nil)
	d.Call(http.StatusNoContent, http.MethodDelete, p+"/cards/c2", nil)
	d.Call(http.StatusRequestEntityTooLarge, http.MethodPost, p+"/cards", strings.Repeat(" ", apitest.BodyLimit+1))
}

// TestOpenAPIDescribesOperationsAnswers checks /metrics and the profiler.
func TestOpenAPIDescribesOperationsAnswers(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "openapi_test_total", Help: "A counter."}))
	srv := httptest.NewServer(api.New(api.Options{Metrics: reg, Pprof: true}))
	t.Cleanup(srv.Close)
	d := apitest.NewDocCheck(t, srv.URL)
	d.Call(http.StatusOK, http.MethodGet, "/metrics", nil)
	d.Call(http.StatusOK, http.MethodGet, "/debug/pprof/cmdline", nil)
	d.Call(http.StatusOK, http.MethodGet, "/debug/pprof/heap?debug=1", nil)
	d.Call(http.StatusMethodNotAllowed, http.MethodPost, "/debug/pprof/symbol", "0x1")
	d.Call(http.StatusNotFound, http.MethodGet, "/debug/pprof/nosuchprofile", nil)
}

// TestOpenAPIDescribesAdminAnswers checks the /admin routes' exchanges in
// hosted mode, as an operator and as a tenant's admin.
func TestOpenAPIDescribesAdminAnswers(t *testing.T) {
	h := apitest.NewCXDBWith(t, apitest.Options{Hosted: true})
	keys := h.Keys
	d := apitest.NewDocCheck(t, h.URL)
	_, operator := seed.OperatorKey(t, keys)
	d.Key = operator

	d.Call(http.StatusCreated, http.MethodPost, "/admin/tenants", `{"tenant_id":"acme","name":"Acme"}`)
	d.Call(http.StatusCreated, http.MethodPost, "/admin/tenants", `{"tenant_id":"other"}`)
	d.Call(http.StatusConflict, http.MethodPost, "/admin/tenants", `{"tenant_id":"acme","name":"Acme"}`)
	d.Call(http.StatusBadRequest, http.MethodPost, "/admin/tenants", `{"tenant_id":"a b"}`)
	d.Call(http.StatusOK, http.MethodGet, "/admin/tenants", nil)
	var created struct {
		Key struct {
			ID string `json:"key_id"`
		} `json:"key"`
		Secret string `json:"secret"`
	}
	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	d.Call(http.StatusCreated, http.MethodPost, "/admin/keys", `{"tenant_id":"acme","role":"reader","expires_at":"`+expires+`"}`).JSON(t, &created)
	d.Call(http.StatusCreated, http.MethodPost, "/admin/keys", `{"role":"operator"}`)
	d.Call(http.StatusBadRequest, http.MethodPost, "/admin/keys", `{"tenant_id":"acme","role":"operator"}`)
	d.Call(http.StatusBadRequest, http.MethodPost, "/admin/keys", `{"role":"reader"}`)
	d.Call(http.StatusBadRequest, http.MethodPost, "/admin/keys", `{"tenant_id":"acme","role":"root"}`)
	d.Call(http.StatusNotFound, http.MethodPost, "/admin/keys", `{"tenant_id":"nobody","role":"reader"}`)
	d.Call(http.StatusOK, http.MethodGet, "/admin/keys?tenant_id=acme", nil)
	d.Call(http.StatusOK, http.MethodGet, "/admin/keys", nil)
	d.Call(http.StatusOK, http.MethodDelete, "/admin/keys/"+created.Key.ID, nil)
	d.Call(http.StatusNotFound, http.MethodDelete, "/admin/keys/"+created.Key.ID, nil)
	d.Call(http.StatusOK, http.MethodGet, "/admin/audit?tenant_id=acme&limit=5", nil)
	d.Call(http.StatusBadRequest, http.MethodGet, "/admin/audit?limit=0", nil)
	d.Call(http.StatusOK, http.MethodPut, "/admin/tenants/acme/quota", `{"bytes":1048576}`)
	d.Call(http.StatusBadRequest, http.MethodPut, "/admin/tenants/acme/quota", `{}`)
	d.Call(http.StatusNotFound, http.MethodPut, "/admin/tenants/nobody/quota", `{"bytes":0}`)
	d.Call(http.StatusOK, http.MethodPut, "/admin/tenants/acme/rate", `{"per_sec":10.5,"burst":20}`)
	d.Call(http.StatusOK, http.MethodPut, "/admin/tenants/other/rate", `{}`)
	d.Call(http.StatusBadRequest, http.MethodPut, "/admin/tenants/acme/rate", `{"per_sec":10,"burst":0}`)
	d.Call(http.StatusOK, http.MethodGet, "/admin/usage", nil)
	d.Call(http.StatusOK, http.MethodGet, "/admin/usage?tenant_id=acme", nil)
	d.Call(http.StatusNotFound, http.MethodGet, "/admin/usage?tenant_id=nobody", nil)

	// A tenant's admin reaches its own tenant alone.
	d.Call(http.StatusCreated, http.MethodPost, "/admin/keys", `{"tenant_id":"acme","role":"admin"}`).JSON(t, &created)
	d.Key = created.Secret
	d.Call(http.StatusOK, http.MethodGet, "/admin/tenants", nil)
	d.Call(http.StatusForbidden, http.MethodPost, "/admin/tenants", `{"tenant_id":"mine"}`)
	d.Call(http.StatusForbidden, http.MethodDelete, "/admin/tenants/other", nil)
	d.Call(http.StatusForbidden, http.MethodPut, "/admin/tenants/acme/quota", `{"bytes":1}`)
	d.Call(http.StatusForbidden, http.MethodPut, "/admin/tenants/acme/rate", `{}`)
	d.Call(http.StatusForbidden, http.MethodPost, "/admin/keys", `{"role":"operator"}`)
	d.Call(http.StatusCreated, http.MethodPost, "/admin/keys", `{"role":"writer"}`)
	d.Call(http.StatusNotFound, http.MethodPost, "/admin/keys", `{"tenant_id":"other","role":"writer"}`)
	d.Call(http.StatusOK, http.MethodGet, "/admin/keys", nil)
	d.Call(http.StatusNotFound, http.MethodGet, "/admin/keys?tenant_id=other", nil)
	d.Call(http.StatusOK, http.MethodGet, "/admin/audit", nil)
	d.Call(http.StatusNotFound, http.MethodGet, "/admin/audit?tenant_id=other", nil)
	d.Call(http.StatusOK, http.MethodGet, "/admin/usage", nil)
	d.Call(http.StatusNotFound, http.MethodGet, "/admin/usage?tenant_id=other", nil)

	d.Key = operator
	d.Call(http.StatusNoContent, http.MethodDelete, "/admin/tenants/acme", nil)
	d.Call(http.StatusNotFound, http.MethodDelete, "/admin/tenants/acme", nil)
	d.Call(http.StatusConflict, http.MethodDelete, "/admin/tenants/default", nil)

	d.Key = ""
	d.Call(http.StatusUnauthorized, http.MethodGet, "/admin/tenants", nil)
	_, writer := seed.Key(t, keys, "other", auth.RoleWriter)
	d.Key = writer
	d.Call(http.StatusForbidden, http.MethodGet, "/admin/tenants", nil)
}
