package deploytest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// composeSchema compiles testdata/compose-spec-subset.json, a hand-kept
// subset of the compose spec's schema (see its $comment).
func composeSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "compose-spec-subset.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("compose-spec-subset.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("compose-spec-subset.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// composeDocument is docker-compose.yml as the JSON value the schema
// validates (interpolated as compose does with no variable set).
func composeDocument(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(interpolate(t, string(b))), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// asJSON turns a YAML value into what the validator takes: the value
// encoding/json would decode (numbers as json.Number).
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestComposeFileFollowsTheComposeSpec(t *testing.T) {
	sch := composeSchema(t)
	if err := sch.Validate(asJSON(t, composeDocument(t))); err != nil {
		t.Fatalf("docker-compose.yml does not follow the compose spec (testdata/compose-spec-subset.json):\n%v", err)
	}
}

// The schema refuses what the spec refuses: it would catch a misspelt
// key or a wrong value in docker-compose.yml.
func TestComposeSchemaRefusesMistakes(t *testing.T) {
	sch := composeSchema(t)
	service := func(doc map[string]any, name string) map[string]any {
		return doc["services"].(map[string]any)[name].(map[string]any)
	}
	for name, spoil := range map[string]func(doc map[string]any){
		"a misspelt service key": func(doc map[string]any) {
			s := service(doc, "cardboxd")
			s["helthcheck"] = s["healthcheck"]
			delete(s, "healthcheck")
		},
		"an unknown top-level key": func(doc map[string]any) { doc["service"] = doc["services"] },
		"a depends_on condition the spec lacks": func(doc map[string]any) {
			service(doc, "cardboxd")["depends_on"] = map[string]any{"postgres": map[string]any{"condition": "service_ready"}}
		},
		"depends_on without its condition": func(doc map[string]any) {
			service(doc, "cardboxd")["depends_on"] = map[string]any{"postgres": map[string]any{"required": true}}
		},
		"a misspelt healthcheck key": func(doc map[string]any) {
			service(doc, "postgres")["healthcheck"].(map[string]any)["intervall"] = "2s"
		},
		"a secret with an unknown key": func(doc map[string]any) {
			doc["secrets"].(map[string]any)["operator_key"].(map[string]any)["path"] = "x"
		},
		"a port object with an unknown key": func(doc map[string]any) {
			service(doc, "cardboxd")["ports"] = []any{map[string]any{"target": 9010, "host": "127.0.0.1"}}
		},
		"an environment value that is a list": func(doc map[string]any) {
			service(doc, "cardboxd")["environment"].(map[string]any)["CARDBOX_MODE"] = []any{"hosted"}
		},
		"a command that is a number": func(doc map[string]any) { service(doc, "cardboxd")["command"] = 1 },
		"a volume mount of an unknown type": func(doc map[string]any) {
			service(doc, "cardboxd")["volumes"] = []any{map[string]any{"type": "disk", "target": "/x"}}
		},
	} {
		doc := composeDocument(t)
		spoil(doc)
		if err := sch.Validate(asJSON(t, doc)); err == nil {
			t.Errorf("%s: valid, want refused", name)
		}
	}
}
