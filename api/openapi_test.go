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
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/docs"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// openAPIDoc is docs/openapi.yaml as kin-openapi loads it (references
// resolved).
func openAPIDoc(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	if err != nil {
		t.Fatalf("load docs/openapi.yaml: %v", err)
	}
	return doc
}

// TestOpenAPIIsValid checks that docs/openapi.yaml is a valid OpenAPI 3
// document: structure, references, path parameters, and every example
// against its schema; and that operation ids are unique.
func TestOpenAPIIsValid(t *testing.T) {
	doc := openAPIDoc(t)
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
		c.Mode, c.Pprof, c.HTTPBodyLimit = daemon.ModeHosted, true, testBodyLimit
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
	doc := openAPIDoc(t)
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

// docCheck sends requests to a server and checks each exchange against
// docs/openapi.yaml with kin-openapi: the answer's status must be
// documented for the operation (or covered by its default), its headers
// and JSON body must fit the documented schema; a request expected to
// succeed must itself fit the document (parameters and body).
type docCheck struct {
	t   testing.TB
	doc *openapi3.T
	url string
	key string // hosted mode: the bearer key sent
}

func newDocCheck(t testing.TB, url string) *docCheck {
	return &docCheck{t: t, doc: openAPIDoc(t), url: url}
}

// call sends a request (body nil, a string, []byte, or a value encoded as
// JSON) with headers as name, value pairs, wants status, and checks the
// exchange against the document.
func (d *docCheck) call(want int, method, path string, body any, headers ...string) response {
	d.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			d.t.Fatal(err)
		}
	}
	newReq := func() *http.Request {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequest(method, d.url+path, rd)
		if err != nil {
			d.t.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if d.key != "" {
			req.Header.Set("Authorization", "Bearer "+d.key)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		return req
	}
	res, err := http.DefaultClient.Do(newReq())
	if err != nil {
		d.t.Fatal(err)
	}
	out, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		d.t.Fatal(err)
	}
	r := response{Status: res.StatusCode, Header: res.Header, Body: out}
	if r.Status != want {
		d.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, out)
	}
	if err := d.check(newReq(), r, want < 400); err != nil {
		d.t.Errorf("%s %s: does not match docs/openapi.yaml: %v\n%s", method, path, err, out)
	}
	return r
}

// check validates an exchange: the request too when checkRequest.
func (d *docCheck) check(req *http.Request, r response, checkRequest bool) error {
	tpl, params, ok := d.route(req.URL.EscapedPath())
	if !ok {
		return fmt.Errorf("no documented path matches %s", req.URL.Path)
	}
	item := d.doc.Paths.Value(tpl)
	op := item.GetOperation(req.Method)
	if op == nil {
		return fmt.Errorf("%s %s is not documented", req.Method, tpl)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params,
		Route:   &routers.Route{Spec: d.doc, Path: tpl, PathItem: item, Method: req.Method, Operation: op},
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if checkRequest {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			return fmt.Errorf("request: %w", err)
		}
	}
	ct := r.Header.Get("Content-Type")
	if r.Status != http.StatusNotModified && r.Status != http.StatusNoContent && op.Responses.Status(r.Status) == nil {
		return fmt.Errorf("status %d is not documented (only the default covers it)", r.Status)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: r.Status, Header: r.Header,
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			// Only JSON bodies have schemas worth checking; the others
			// (bytes, text, YAML, event streams) are checked for their
			// content type.
			ExcludeResponseBody: !strings.HasPrefix(ct, "application/json"),
		},
	}
	out.SetBodyBytes(r.Body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	if ref := op.Responses.Status(r.Status); ref != nil && len(ref.Value.Content) > 0 && len(r.Body) > 0 && ref.Value.Content.Get(ct) == nil {
		return fmt.Errorf("response content type %q is not documented for status %d", ct, r.Status)
	}
	if strings.HasPrefix(ct, "application/json") {
		// kin-openapi lets a JSON object carry members its schema does
		// not name; the harness's validator does not (unless the schema
		// allows additional properties).
		if err := spec(d.t).checkResponse(req.Method, req.URL.EscapedPath(), r); err != nil {
			return fmt.Errorf("response: %w", err)
		}
	}
	return nil
}

// route finds the documented path of a request path and its parameters:
// literal segments win over parameters, and a trailing {path} takes the
// rest of the path (echo's *).
func (d *docCheck) route(path string) (string, map[string]string, bool) {
	segs := strings.Split(path, "/")
	best, bestScore := "", -1
	var bestParams map[string]string
	for tpl := range d.doc.Paths.Map() {
		ts := strings.Split(tpl, "/")
		rest := len(ts) > 0 && ts[len(ts)-1] == "{path}"
		if len(ts) != len(segs) && !(rest && len(segs) > len(ts)) {
			continue
		}
		score, params := 0, map[string]string{}
		for i, s := range ts {
			switch {
			case rest && i == len(ts)-1:
				params["path"] = strings.Join(segs[i:], "/")
			case strings.HasPrefix(s, "{"):
				params[strings.Trim(s, "{}")] = segs[i]
			case s == segs[i]:
				score++
			default:
				score = -1
			}
			if score < 0 {
				break
			}
		}
		if score > bestScore {
			best, bestScore, bestParams = tpl, score, params
		}
	}
	return best, bestParams, bestScore >= 0
}

// TestOpenAPIDescribesCXDBAnswers drives the CXDB HTTP API (dev mode)
// through its success and error answers and checks every exchange against
// the document.
func TestOpenAPIDescribesCXDBAnswers(t *testing.T) {
	h := newCXDBHarness(t)
	d := newDocCheck(t, h.url)
	bundle := "/v1/registry/bundles/" + registry.ConversationBundleID
	d.call(http.StatusCreated, http.MethodPut, bundle, registry.ConversationBundle)
	d.call(http.StatusNoContent, http.MethodPut, bundle, registry.ConversationBundle)
	d.call(http.StatusUnprocessableEntity, http.MethodPut, "/v1/registry/bundles/other", registry.ConversationBundle)
	etag := d.call(http.StatusOK, http.MethodGet, bundle, nil).Header.Get("ETag")
	d.call(http.StatusNotModified, http.MethodGet, bundle, nil, "If-None-Match", etag)
	d.call(http.StatusNotFound, http.MethodGet, "/v1/registry/bundles/nope", nil)
	d.call(http.StatusOK, http.MethodGet, "/v1/registry/types", nil)
	d.call(http.StatusOK, http.MethodGet, "/v1/registry/types/cxdb.ConversationItem/versions/3", nil)
	d.call(http.StatusNotFound, http.MethodGet, "/v1/registry/types/cxdb.ConversationItem/versions/99", nil)
	d.call(http.StatusOK, http.MethodGet, "/v1/registry/renderers", nil)

	var created struct {
		ContextID string `json:"context_id"`
	}
	d.call(http.StatusCreated, http.MethodPost, "/v1/contexts/create", nil)
	d.call(http.StatusCreated, http.MethodPost, "/v1/contexts/create", `{"base_turn_id":"0"}`).JSON(t, &created)
	d.call(http.StatusBadRequest, http.MethodPost, "/v1/contexts/create", `{"base":1}`)
	ctx := "/v1/contexts/" + created.ContextID
	item := `{"item_type":"user_input","status":"complete","timestamp":"2023-11-14T22:13:20+00:00","user_input":{"text":"hello","files":["a.txt"]}}`
	var appended struct {
		TurnID string `json:"turn_id"`
	}
	d.call(http.StatusCreated, http.MethodPost, ctx+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":`+item+`,"idempotency_key":"k"}`).JSON(t, &appended)
	d.call(http.StatusCreated, http.MethodPost, ctx+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":`+item+`,"idempotency_key":"k"}`)
	d.call(http.StatusCreated, http.MethodPost, ctx+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"system"},"parent_turn_id":`+appended.TurnID+`}`)
	d.call(http.StatusUnprocessableEntity, http.MethodPost, ctx+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":7}}`)
	d.call(http.StatusBadRequest, http.MethodPost, ctx+"/append", `{"type_version":3}`)
	d.call(http.StatusConflict, http.MethodPost, ctx+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"system"},"if_head":"0"}`)
	d.call(http.StatusNotFound, http.MethodPost, "/v1/contexts/999999/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{}}`)
	d.call(http.StatusCreated, http.MethodPost, "/v1/contexts/fork", `{"base_turn_id":"`+appended.TurnID+`"}`)
	d.call(http.StatusCreated, http.MethodPost, "/v1/contexts/fork", `{"base_turn_id":`+appended.TurnID+`}`)
	d.call(http.StatusBadRequest, http.MethodPost, "/v1/contexts/fork", `{}`)
	d.call(http.StatusNotFound, http.MethodPost, "/v1/contexts/fork", `{"base_turn_id":"999999"}`)

	// A chain whose first turn carries context metadata and provenance.
	var meta struct {
		ContextID string `json:"context_id"`
	}
	d.call(http.StatusCreated, http.MethodPost, "/v1/contexts/create", nil).JSON(t, &meta)
	d.call(http.StatusCreated, http.MethodPost, "/v1/contexts/"+meta.ContextID+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"system","context_metadata":{"client_tag":"agent","title":"Docs","labels":["a","b"],`+
			`"provenance":{"parent_context_id":"`+created.ContextID+`","spawn_reason":"test","process_pid":42,"env":{"K":"V"},"captured_at":"2023-11-14T22:13:20Z"}}}}`)
	eventually(t, "the context's metadata", func() bool {
		var e struct{ Title string }
		json.Unmarshal(h.get("/v1/contexts/"+meta.ContextID).Body, &e)
		return e.Title == "Docs"
	})
	d.call(http.StatusOK, http.MethodGet, "/v1/contexts/"+meta.ContextID, nil)
	d.call(http.StatusOK, http.MethodGet, "/v1/contexts/"+meta.ContextID+"/provenance", nil)
	d.call(http.StatusOK, http.MethodGet, "/v1/contexts?include_provenance=true&label=a&tag=agent", nil)
	d.call(http.StatusOK, http.MethodGet, "/v1/contexts/search?q="+url.QueryEscape(`title = "Docs"`), nil)

	d.call(http.StatusOK, http.MethodGet, "/v1/contexts", nil)
	d.call(http.StatusOK, http.MethodGet, "/v1/contexts?limit=1&include_provenance=1&label=a&label=b&title=x", nil)
	d.call(http.StatusOK, http.MethodGet, "/v1/contexts?tag=&q="+url.QueryEscape(`depth > 0`), nil)
	d.call(http.StatusBadRequest, http.MethodGet, "/v1/contexts?limit=x", nil)
	d.call(http.StatusOK, http.MethodGet, "/v1/contexts/search?q="+url.QueryEscape(`depth >= 1`)+"&limit=5", nil)
	d.call(http.StatusBadRequest, http.MethodGet, "/v1/contexts/search", nil)
	d.call(http.StatusBadRequest, http.MethodGet, "/v1/contexts/search?q="+url.QueryEscape(`depth >`), nil)
	d.call(http.StatusBadRequest, http.MethodGet, "/v1/contexts/search?q="+url.QueryEscape(`nosuchfield = 1`), nil)
	d.call(http.StatusBadRequest, http.MethodGet, "/v1/contexts/search?q=depth%3E0&limit=x", nil)
	d.call(http.StatusOK, http.MethodGet, ctx, nil)
	d.call(http.StatusOK, http.MethodGet, ctx+"/provenance", nil)
	d.call(http.StatusNotFound, http.MethodGet, "/v1/contexts/999999", nil)
	d.call(http.StatusBadRequest, http.MethodGet, "/v1/contexts/abc", nil)
	d.call(http.StatusNotFound, http.MethodGet, "/v1/contexts/999999/provenance", nil)

	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	d.call(http.StatusOK, http.MethodGet, ctx+"/turns?limit=1", nil).JSON(t, &page)
	d.call(http.StatusOK, http.MethodGet, ctx+"/turns?limit=1&cursor="+page.NextCursor, nil)
	d.call(http.StatusOK, http.MethodGet, ctx+"/turns?view=both&include_unknown=1&u64_format=number&enum_render=both&time_render=unix_ms", nil)
	d.call(http.StatusOK, http.MethodGet, ctx+"/turns?view=raw&bytes_render=hex", nil)
	d.call(http.StatusOK, http.MethodGet, ctx+"/turns?view=raw&bytes_render=len_only&type_id=cxdb.ConversationItem&type_version=3", nil)
	d.call(http.StatusOK, http.MethodGet, ctx+"/turns?type_hint_mode=explicit&as_type_id=cxdb.UserInput&as_type_version=1", nil)
	d.call(http.StatusOK, http.MethodGet, ctx+"/turns?before_turn_id="+appended.TurnID, nil)
	d.call(http.StatusBadRequest, http.MethodGet, ctx+"/turns?view=nope", nil)
	d.call(http.StatusBadRequest, http.MethodGet, ctx+"/turns?limit=10001", nil)
	d.call(http.StatusNotFound, http.MethodGet, "/v1/contexts/999999/turns", nil)

	// A turn of an unregistered type renders with a per-turn error; fs
	// snapshots and blobs come over the binary protocol.
	c := h.client()
	basic, _ := uploadBasicTree(t, c)
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
	d.call(http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/contexts/%d/turns", head.ContextID), nil)
	fs := fmt.Sprintf("/v1/turns/%d/fs", turn.NewTurnID)
	d.call(http.StatusOK, http.MethodGet, fs, nil)
	d.call(http.StatusOK, http.MethodGet, fs+"?path=src", nil)
	d.call(http.StatusUnprocessableEntity, http.MethodGet, fs+"?path=README.md", nil)
	d.call(http.StatusNotFound, http.MethodGet, fs+"?path=nope", nil)
	d.call(http.StatusOK, http.MethodGet, fs+"/src/lib.go", nil)
	d.call(http.StatusOK, http.MethodGet, fs+"/README.md?format=json", nil)
	d.call(http.StatusOK, http.MethodGet, fs+"/src", nil)
	d.call(http.StatusNotFound, http.MethodGet, "/v1/turns/999999/fs", nil)
	d.call(http.StatusBadRequest, http.MethodGet, "/v1/turns/abc/fs", nil)
	d.call(http.StatusOK, http.MethodGet, "/v1/blobs/"+hex.EncodeToString(basic[:]), nil)
	d.call(http.StatusNotFound, http.MethodGet, "/v1/blobs/"+strings.Repeat("0", 64), nil)
	d.call(http.StatusBadRequest, http.MethodGet, "/v1/blobs/xyz", nil)
	d.call(http.StatusOK, http.MethodPost, "/v1/blobs/missing", `{"hashes":["`+hex.EncodeToString(basic[:])+`","`+strings.Repeat("0", 64)+`"]}`)
	d.call(http.StatusBadRequest, http.MethodPost, "/v1/blobs/missing", `{"hashes":["xyz"]}`)
	d.call(http.StatusOK, http.MethodGet, "/v1/metrics", nil)

	// The event stream: its status and content type.
	s := h.events("")
	r := response{Status: s.res.StatusCode, Header: s.res.Header}
	if err := d.check(s.res.Request, r, true); err != nil {
		t.Errorf("GET /v1/events: does not match docs/openapi.yaml: %v", err)
	}
	s.until("connected")
}

// TestOpenAPIDescribesCardBoxAnswers checks CardBox exchanges, /healthz
// and /openapi.yaml against the document with kin-openapi (the CardBox
// tests check every answer they get with the harness's own validator).
func TestOpenAPIDescribesCardBoxAnswers(t *testing.T) {
	h := newHarness(t)
	d := newDocCheck(t, h.url)
	d.call(http.StatusOK, http.MethodGet, "/healthz", nil)
	d.call(http.StatusOK, http.MethodGet, "/openapi.yaml", nil)
	p := "/projects/p1"
	d.call(http.StatusCreated, http.MethodPost, p+"/cards", map[string]any{"cards": []any{
		card("c1", "task.instruction", "one"), card("c2", "agent.thought", "two"),
	}})
	d.call(http.StatusCreated, http.MethodPost, p+"/cards", map[string]any{
		"card_id": "c3", "content": map[string]any{"x": 1}, "metadata": map[string]any{"type": "tool.call", "role": "assistant"},
		"tool_calls": []any{map[string]any{"id": "t1"}}, "ttl_seconds": 60,
	})
	d.call(http.StatusConflict, http.MethodPost, p+"/cards", card("c1", "task.instruction", "changed"))
	d.call(http.StatusBadRequest, http.MethodPost, p+"/cards", `{"cards":[{"metadata":{"type":"task.instruction"},"nope":1}]}`)
	d.call(http.StatusOK, http.MethodGet, p+"/cards/c1", nil)
	d.call(http.StatusNotFound, http.MethodGet, p+"/cards/none", nil)
	d.call(http.StatusOK, http.MethodPost, p+"/cards/batch", `{"card_ids":["c1","none"]}`)
	var box struct {
		BoxID string `json:"box_id"`
	}
	d.call(http.StatusCreated, http.MethodPost, p+"/boxes", `{"card_ids":["c1"],"metadata":{"k":"v"}}`).JSON(t, &box)
	d.call(http.StatusUnprocessableEntity, http.MethodPost, p+"/boxes", `{"card_ids":["none"]}`)
	d.call(http.StatusOK, http.MethodPut, p+"/boxes/b2", `{"card_ids":["c1","c2"],"parent_ids":["`+box.BoxID+`"]}`)
	d.call(http.StatusOK, http.MethodGet, p+"/boxes/b2", nil)
	d.call(http.StatusOK, http.MethodPost, p+"/boxes/b2/append", `{"card_ids":["c3"]}`)
	d.call(http.StatusOK, http.MethodPost, p+"/boxes/b2/append?return=box", `{"card_ids":["c3"]}`)
	d.call(http.StatusOK, http.MethodGet, p+"/boxes/b2/cards?limit=2", nil)
	d.call(http.StatusOK, http.MethodPost, p+"/boxes/batch", `{"box_ids":["b2","none"],"hydrate":true,"limit":10}`)
	d.call(http.StatusNoContent, http.MethodDelete, p+"/boxes/b2", nil)
	d.call(http.StatusNotFound, http.MethodGet, p+"/boxes/b2", nil)
	d.call(http.StatusNoContent, http.MethodDelete, p+"/cards/c2", nil)
	d.call(http.StatusRequestEntityTooLarge, http.MethodPost, p+"/cards", strings.Repeat(" ", testBodyLimit+1))
}

// TestOpenAPIDescribesOperationsAnswers checks /metrics and the profiler.
func TestOpenAPIDescribesOperationsAnswers(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "openapi_test_total", Help: "A counter."}))
	srv := httptest.NewServer(api.New(api.Options{Metrics: reg, Pprof: true}))
	t.Cleanup(srv.Close)
	d := newDocCheck(t, srv.URL)
	d.call(http.StatusOK, http.MethodGet, "/metrics", nil)
	d.call(http.StatusOK, http.MethodGet, "/debug/pprof/cmdline", nil)
	d.call(http.StatusOK, http.MethodGet, "/debug/pprof/heap?debug=1", nil)
	d.call(http.StatusMethodNotAllowed, http.MethodPost, "/debug/pprof/symbol", "0x1")
	d.call(http.StatusNotFound, http.MethodGet, "/debug/pprof/nosuchprofile", nil)
}

// TestOpenAPIDescribesAdminAnswers checks the /admin routes' exchanges in
// hosted mode, as an operator and as a tenant's admin.
func TestOpenAPIDescribesAdminAnswers(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	keys := tenancy.New(pool, nil)
	usage := func(context.Context, string) (int64, int64) { return 4096, 0 }
	srv := httptest.NewServer(api.New(api.Options{Auth: auth.NewKeys(pool, nil), Routes: []api.Routes{api.Admin(keys).WithUsage(usage)}}))
	t.Cleanup(srv.Close)
	d := newDocCheck(t, srv.URL)
	_, operator, err := keys.CreateOperatorKey(ctx, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	d.key = operator

	d.call(http.StatusCreated, http.MethodPost, "/admin/tenants", `{"tenant_id":"acme","name":"Acme"}`)
	d.call(http.StatusCreated, http.MethodPost, "/admin/tenants", `{"tenant_id":"other"}`)
	d.call(http.StatusConflict, http.MethodPost, "/admin/tenants", `{"tenant_id":"acme","name":"Acme"}`)
	d.call(http.StatusBadRequest, http.MethodPost, "/admin/tenants", `{"tenant_id":"a b"}`)
	d.call(http.StatusOK, http.MethodGet, "/admin/tenants", nil)
	var created struct {
		Key struct {
			ID string `json:"key_id"`
		} `json:"key"`
		Secret string `json:"secret"`
	}
	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	d.call(http.StatusCreated, http.MethodPost, "/admin/keys", `{"tenant_id":"acme","role":"reader","expires_at":"`+expires+`"}`).JSON(t, &created)
	d.call(http.StatusCreated, http.MethodPost, "/admin/keys", `{"role":"operator"}`)
	d.call(http.StatusBadRequest, http.MethodPost, "/admin/keys", `{"tenant_id":"acme","role":"operator"}`)
	d.call(http.StatusBadRequest, http.MethodPost, "/admin/keys", `{"role":"reader"}`)
	d.call(http.StatusBadRequest, http.MethodPost, "/admin/keys", `{"tenant_id":"acme","role":"root"}`)
	d.call(http.StatusNotFound, http.MethodPost, "/admin/keys", `{"tenant_id":"nobody","role":"reader"}`)
	d.call(http.StatusOK, http.MethodGet, "/admin/keys?tenant_id=acme", nil)
	d.call(http.StatusOK, http.MethodGet, "/admin/keys", nil)
	d.call(http.StatusOK, http.MethodDelete, "/admin/keys/"+created.Key.ID, nil)
	d.call(http.StatusNotFound, http.MethodDelete, "/admin/keys/"+created.Key.ID, nil)
	d.call(http.StatusOK, http.MethodGet, "/admin/audit?tenant_id=acme&limit=5", nil)
	d.call(http.StatusBadRequest, http.MethodGet, "/admin/audit?limit=0", nil)
	d.call(http.StatusOK, http.MethodPut, "/admin/tenants/acme/quota", `{"bytes":1048576}`)
	d.call(http.StatusBadRequest, http.MethodPut, "/admin/tenants/acme/quota", `{}`)
	d.call(http.StatusNotFound, http.MethodPut, "/admin/tenants/nobody/quota", `{"bytes":0}`)
	d.call(http.StatusOK, http.MethodPut, "/admin/tenants/acme/rate", `{"per_sec":10.5,"burst":20}`)
	d.call(http.StatusOK, http.MethodPut, "/admin/tenants/other/rate", `{}`)
	d.call(http.StatusBadRequest, http.MethodPut, "/admin/tenants/acme/rate", `{"per_sec":10,"burst":0}`)
	d.call(http.StatusOK, http.MethodGet, "/admin/usage", nil)
	d.call(http.StatusOK, http.MethodGet, "/admin/usage?tenant_id=acme", nil)
	d.call(http.StatusNotFound, http.MethodGet, "/admin/usage?tenant_id=nobody", nil)

	// A tenant's admin reaches its own tenant alone.
	d.call(http.StatusCreated, http.MethodPost, "/admin/keys", `{"tenant_id":"acme","role":"admin"}`).JSON(t, &created)
	d.key = created.Secret
	d.call(http.StatusOK, http.MethodGet, "/admin/tenants", nil)
	d.call(http.StatusForbidden, http.MethodPost, "/admin/tenants", `{"tenant_id":"mine"}`)
	d.call(http.StatusForbidden, http.MethodDelete, "/admin/tenants/other", nil)
	d.call(http.StatusForbidden, http.MethodPut, "/admin/tenants/acme/quota", `{"bytes":1}`)
	d.call(http.StatusForbidden, http.MethodPut, "/admin/tenants/acme/rate", `{}`)
	d.call(http.StatusForbidden, http.MethodPost, "/admin/keys", `{"role":"operator"}`)
	d.call(http.StatusCreated, http.MethodPost, "/admin/keys", `{"role":"writer"}`)
	d.call(http.StatusNotFound, http.MethodPost, "/admin/keys", `{"tenant_id":"other","role":"writer"}`)
	d.call(http.StatusOK, http.MethodGet, "/admin/keys", nil)
	d.call(http.StatusNotFound, http.MethodGet, "/admin/keys?tenant_id=other", nil)
	d.call(http.StatusOK, http.MethodGet, "/admin/audit", nil)
	d.call(http.StatusNotFound, http.MethodGet, "/admin/audit?tenant_id=other", nil)
	d.call(http.StatusOK, http.MethodGet, "/admin/usage", nil)
	d.call(http.StatusNotFound, http.MethodGet, "/admin/usage?tenant_id=other", nil)

	d.key = operator
	d.call(http.StatusNoContent, http.MethodDelete, "/admin/tenants/acme", nil)
	d.call(http.StatusNotFound, http.MethodDelete, "/admin/tenants/acme", nil)
	d.call(http.StatusConflict, http.MethodDelete, "/admin/tenants/default", nil)

	d.key = ""
	d.call(http.StatusUnauthorized, http.MethodGet, "/admin/tenants", nil)
	_, writer, err := keys.CreateKey(ctx, "test", "other", auth.RoleWriter, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.key = writer
	d.call(http.StatusForbidden, http.MethodGet, "/admin/tenants", nil)
}
