package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/cardboxhq/cardbox/docs"
)

// OpenAPIDoc is docs/openapi.yaml as kin-openapi loads it (references
// resolved).
func OpenAPIDoc(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	if err != nil {
		t.Fatalf("load docs/openapi.yaml: %v", err)
	}
	return doc
}

// DocCheck sends requests to a server and checks each exchange against
// docs/openapi.yaml with kin-openapi: the answer's status must be
// documented for the operation (or covered by its default), its headers
// and JSON body must fit the documented schema; a request expected to
// succeed must itself fit the document (parameters and body).
type DocCheck struct {
	T   testing.TB
	doc *openapi3.T
	URL string
	Key string // hosted mode: the bearer key sent
}

// NewDocCheck checks the exchanges with the server at url.
func NewDocCheck(t testing.TB, url string) *DocCheck {
	t.Helper()
	return &DocCheck{T: t, doc: OpenAPIDoc(t), URL: url}
}

// Call sends a request (body nil, a string, []byte, or a value encoded as
// JSON) with headers as name, value pairs, wants status, and checks the
// exchange against the document.
func (d *DocCheck) Call(want int, method, path string, body any, headers ...string) Response {
	d.T.Helper()
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
			d.T.Fatal(err)
		}
	}
	newReq := func() *http.Request {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequest(method, d.URL+path, rd)
		if err != nil {
			d.T.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if d.Key != "" {
			req.Header.Set("Authorization", "Bearer "+d.Key)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		return req
	}
	res, err := http.DefaultClient.Do(newReq())
	if err != nil {
		d.T.Fatal(err)
	}
	out, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		d.T.Fatal(err)
	}
	r := Response{Status: res.StatusCode, Header: res.Header, Body: out}
	if r.Status != want {
		d.T.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, out)
	}
	if err := d.Check(newReq(), r, want < 400); err != nil {
		d.T.Errorf("%s %s: does not match docs/openapi.yaml: %v\n%s", method, path, err, out)
	}
	return r
}

// Check validates an exchange: the request too when checkRequest.
func (d *DocCheck) Check(req *http.Request, r Response, checkRequest bool) error {
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
		if err := Spec(d.T).CheckResponse(req.Method, req.URL.EscapedPath(), r); err != nil {
			return fmt.Errorf("response: %w", err)
		}
	}
	return nil
}

// route finds the documented path of a request path and its parameters:
// literal segments win over parameters, and a trailing {path} takes the
// rest of the path (echo's *).
func (d *DocCheck) route(path string) (string, map[string]string, bool) {
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
