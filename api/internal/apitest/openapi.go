package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/cardboxhq/cardbox/docs"
)

// OpenAPI is the parsed docs/openapi.yaml with a small checker for the
// subset of JSON Schema the document uses.
type OpenAPI struct {
	doc   map[string]any
	paths map[string]map[string]any // template -> method -> operation
}

var (
	specOnce sync.Once
	specDoc  *OpenAPI
	specErr  error
)

// Spec is docs/openapi.yaml, loaded once, for checking answers.
func Spec(t testing.TB) *OpenAPI {
	t.Helper()
	specOnce.Do(func() {
		var doc map[string]any
		if specErr = yaml.Unmarshal(docs.OpenAPI, &doc); specErr != nil {
			return
		}
		s := &OpenAPI{doc: doc, paths: map[string]map[string]any{}}
		for p, item := range doc["paths"].(map[string]any) {
			s.paths[p] = map[string]any{}
			for m, op := range item.(map[string]any) {
				if m != "parameters" {
					s.paths[p][strings.ToUpper(m)] = op
				}
			}
		}
		specDoc = s
	})
	if specErr != nil {
		t.Fatalf("parse docs/openapi.yaml: %v", specErr)
	}
	return specDoc
}

// match finds the path template for a request path; literal segments win
// over parameters.
func (s *OpenAPI) match(path string) (string, bool) {
	segs := strings.Split(path, "/")
	best, bestScore := "", -1
	for tpl := range s.paths {
		ts := strings.Split(tpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		score := 0
		for i := range ts {
			switch {
			case strings.HasPrefix(ts[i], "{"):
			case ts[i] == segs[i]:
				score++
			default:
				score = -1
			}
			if score < 0 {
				break
			}
		}
		if score > bestScore {
			best, bestScore = tpl, score
		}
	}
	return best, bestScore >= 0
}

// CheckResponse checks that the status is documented for the operation and
// that a JSON body validates against the documented schema.
func (s *OpenAPI) CheckResponse(method, path string, r Response) error {
	tpl, ok := s.match(path)
	if !ok {
		return fmt.Errorf("no path matches %s", path)
	}
	op, ok := s.paths[tpl][method].(map[string]any)
	if !ok {
		if r.Status == http.StatusMethodNotAllowed || r.Status == http.StatusNotFound {
			return nil
		}
		return fmt.Errorf("%s %s is not documented", method, tpl)
	}
	resp, ok := op["responses"].(map[string]any)[strconv.Itoa(r.Status)].(map[string]any)
	if !ok {
		return fmt.Errorf("status %d of %s %s is not documented", r.Status, method, tpl)
	}
	resp = s.resolve(resp)
	content, _ := resp["content"].(map[string]any)
	media, ok := content["application/json"].(map[string]any)
	if !ok {
		return nil
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("content type %q, want application/json", ct)
	}
	var body any
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		return err
	}
	return s.validate(media["schema"].(map[string]any), body, "$")
}

// resolve follows a $ref.
func (s *OpenAPI) resolve(node map[string]any) map[string]any {
	ref, ok := node["$ref"].(string)
	if !ok {
		return node
	}
	var cur any = s.doc
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		cur = cur.(map[string]any)[part]
	}
	return s.resolve(cur.(map[string]any))
}

// validate checks v against schema: $ref, type, nullable, required,
// properties, items, enum, oneOf.
func (s *OpenAPI) validate(schema map[string]any, v any, at string) error {
	schema = s.resolve(schema)
	if v == nil {
		if schema["nullable"] == true || schema["type"] == nil {
			return nil
		}
		return fmt.Errorf("%s: null, want %v", at, schema["type"])
	}
	if alts, ok := schema["oneOf"].([]any); ok {
		for _, alt := range alts {
			if s.validate(alt.(map[string]any), v, at) == nil {
				return nil
			}
		}
		return fmt.Errorf("%s: matches no oneOf alternative", at)
	}
	if err := checkType(schema["type"], v, at); err != nil {
		return err
	}
	if enum, ok := schema["enum"].([]any); ok && !containsValue(enum, v) {
		return fmt.Errorf("%s: %v not in %v", at, v, enum)
	}
	switch val := v.(type) {
	case map[string]any:
		return s.validateObject(schema, val, at)
	case []any:
		items, ok := schema["items"].(map[string]any)
		for i, e := range val {
			if !ok {
				break
			}
			if err := s.validate(items, e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *OpenAPI) validateObject(schema, obj map[string]any, at string) error {
	for _, r := range asList(schema["required"]) {
		if _, ok := obj[r.(string)]; !ok {
			return fmt.Errorf("%s: missing required %q", at, r)
		}
	}
	props, _ := schema["properties"].(map[string]any)
	for k, pv := range obj {
		p, ok := props[k].(map[string]any)
		if !ok {
			if props != nil && schema["additionalProperties"] == nil {
				return fmt.Errorf("%s: undocumented property %q", at, k)
			}
			continue
		}
		if err := s.validate(p, pv, at+"."+k); err != nil {
			return err
		}
	}
	return nil
}

func checkType(t any, v any, at string) error {
	want, ok := t.(string)
	if !ok {
		return nil
	}
	okType := false
	switch v := v.(type) {
	case map[string]any:
		okType = want == "object"
	case []any:
		okType = want == "array"
	case string:
		okType = want == "string"
	case bool:
		okType = want == "boolean"
	case json.Number:
		_, err := v.Int64()
		okType = want == "number" || (want == "integer" && err == nil)
	}
	if !okType {
		return fmt.Errorf("%s: %T, want %s", at, v, want)
	}
	return nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

func containsValue(list []any, v any) bool {
	for _, e := range list {
		if fmt.Sprint(e) == fmt.Sprint(v) {
			return true
		}
	}
	return false
}
