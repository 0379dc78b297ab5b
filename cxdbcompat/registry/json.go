package registry

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// rendererJSON is a renderer as section 4.8 serves it.
type rendererJSON struct {
	ESMURL    string `json:"esm_url"`
	Component string `json:"component,omitempty"`
	Integrity string `json:"integrity,omitempty"`
}

type fieldJSON struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Enum     string `json:"enum,omitempty"`
	Ref      string `json:"ref,omitempty"`
	Items    any    `json:"items,omitempty"`
	Optional bool   `json:"optional,omitempty"`
}

type descriptorJSON struct {
	Fields   map[string]fieldJSON `json:"fields"`
	Renderer *rendererJSON        `json:"renderer,omitempty"`
}

type itemsRefJSON struct {
	Type string `json:"type"`
	Ref  string `json:"ref"`
}

// DescriptorJSON renders the body of GET
// /v1/registry/types/{type_id}/versions/{version} (section 4.8): fields by
// decimal tag, optional keys only when set, no type id or version.
func DescriptorJSON(d Descriptor) ([]byte, error) {
	out := descriptorJSON{Fields: make(map[string]fieldJSON, len(d.Fields))}
	for tag, f := range d.Fields {
		out.Fields[strconv.FormatUint(tag, 10)] = fieldJSON{
			Name: f.Name, Type: f.Type, Enum: f.Enum, Ref: f.Ref,
			Items: itemsJSON(f.Items), Optional: f.Optional,
		}
	}
	out.Renderer = toRendererJSON(d.Renderer)
	return marshal(out)
}

// itemsJSON gives a simple item type as a string and a reference item as
// {"type":"ref","ref":…}, the two shapes the UI reads.
func itemsJSON(it *Items) any {
	switch {
	case it == nil:
		return nil
	case it.Ref != "":
		return itemsRefJSON{Type: "ref", Ref: it.Ref}
	}
	return it.Type
}

func toRendererJSON(r *Renderer) *rendererJSON {
	if r == nil {
		return nil
	}
	return &rendererJSON{ESMURL: r.ESMURL, Component: r.Component, Integrity: r.Integrity}
}

// RenderersJSON renders the body of GET /v1/registry/renderers:
// {"renderers":{"<type_id>":{"esm_url":…}}}, highest versions only.
func (r *Registry) RenderersJSON() ([]byte, error) {
	out := map[string]map[string]*rendererJSON{"renderers": {}}
	for id, rd := range r.Renderers() {
		out["renderers"][id] = toRendererJSON(&rd)
	}
	return marshal(out)
}

// marshal encodes without HTML escaping, so ESM URLs with & stay readable;
// map keys come out sorted, so equal registries give equal bytes.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
