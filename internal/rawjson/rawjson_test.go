package rawjson

import (
	"encoding/json"
	"testing"
)

func TestAppendFields(t *testing.T) {
	tests := []struct {
		name   string
		obj    string
		fields []Field
		want   string
	}{
		{"into empty object", `{}`, []Field{{"data", []byte(`{"a":1}`)}}, `{"data":{"a":1}}`},
		{"after members", `{"id":"1"}`, []Field{{"data", []byte(`[1,2]`)}, {"unknown", []byte(`{}`)}}, `{"id":"1","data":[1,2],"unknown":{}}`},
		{"empty values left out", `{"id":"1"}`, []Field{{"data", nil}, {"unknown", []byte(`null`)}}, `{"id":"1","unknown":null}`},
		{"nothing to add", `{"id":"1"}`, nil, `{"id":"1"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(AppendFields([]byte(tt.obj), tt.fields...))
			if got != tt.want || !json.Valid([]byte(got)) {
				t.Errorf("AppendFields = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestAppendArray(t *testing.T) {
	tests := []struct {
		items []json.RawMessage
		want  string
	}{
		{nil, `[]`},
		{[]json.RawMessage{[]byte(`1`)}, `[1]`},
		{[]json.RawMessage{[]byte(`{"a":1}`), []byte(`"x"`)}, `[{"a":1},"x"]`},
	}
	for _, tt := range tests {
		if got := string(AppendArray([]byte(nil), tt.items)); got != tt.want {
			t.Errorf("AppendArray(%q) = %s, want %s", tt.items, got, tt.want)
		}
	}
}

func TestAppendFieldsRefusesNonObjects(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("AppendFields accepted an array")
		}
	}()
	AppendFields([]byte(`[1]`), Field{"a", []byte(`1`)})
}
