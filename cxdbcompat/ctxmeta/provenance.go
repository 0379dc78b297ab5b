package ctxmeta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Provenance is tag 10 of the context metadata (§6 of the reference). Nil
// fields were absent or had the wrong type; Go writers send "" for unset
// strings, which stays "". The json struct tags let encoding/json read back
// what MarshalJSON writes.
type Provenance struct {
	ParentContextID   *ContextID        `json:"parent_context_id"`   // tag 1
	SpawnReason       *string           `json:"spawn_reason"`        // tag 2
	RootContextID     *ContextID        `json:"root_context_id"`     // tag 3
	TraceID           *string           `json:"trace_id"`            // tag 10
	SpanID            *string           `json:"span_id"`             // tag 11
	CorrelationID     *string           `json:"correlation_id"`      // tag 12
	OnBehalfOf        *string           `json:"on_behalf_of"`        // tag 20
	OnBehalfOfSource  *string           `json:"on_behalf_of_source"` // tag 21
	OnBehalfOfEmail   *string           `json:"on_behalf_of_email"`  // tag 22
	WriterMethod      *string           `json:"writer_method"`       // tag 30
	WriterSubject     *string           `json:"writer_subject"`      // tag 31
	WriterIssuer      *string           `json:"writer_issuer"`       // tag 32
	ServiceName       *string           `json:"service_name"`        // tag 40
	ServiceVersion    *string           `json:"service_version"`     // tag 41
	ServiceInstanceID *string           `json:"service_instance_id"` // tag 42
	ProcessPID        *int64            `json:"process_pid"`         // tag 43
	ProcessOwner      *string           `json:"process_owner"`       // tag 44
	HostName          *string           `json:"host_name"`           // tag 45
	HostArch          *string           `json:"host_arch"`           // tag 46
	ClientAddress     *string           `json:"client_address"`      // tag 50
	ClientPort        *int64            `json:"client_port"`         // tag 51
	Env               map[string]string `json:"env"`                 // tag 60
	SDKName           *string           `json:"sdk_name"`            // tag 70
	SDKVersion        *string           `json:"sdk_version"`         // tag 71
	CapturedAt        *int64            `json:"captured_at"`         // tag 80 (unix ms)
}

// ContextID is a context id in provenance. It renders as a decimal string,
// as every id in cardbox's JSON does (decisions.md: JavaScript clients lose
// precision above 2^53), and reads back from a string or a number.
type ContextID uint64

// MarshalJSON renders the id as a decimal string.
func (id ContextID) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, strconv.FormatUint(uint64(id), 10)), nil
}

// UnmarshalJSON reads a decimal string or a number.
func (id *ContextID) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("context id %s: %w", b, err)
	}
	*id = ContextID(n)
	return nil
}

// provField is one row of the §6 provenance table: its tag, its JSON key and
// a pointer to the field (**string, **ContextID, **int64 or *map[string]string).
type provField struct {
	tag uint64
	key string
	ptr func(p *Provenance) any
}

// provFields lists the provenance fields in the order of the §6 table, which
// is also the order of the JSON keys.
var provFields = []provField{
	{1, "parent_context_id", func(p *Provenance) any { return &p.ParentContextID }},
	{2, "spawn_reason", func(p *Provenance) any { return &p.SpawnReason }},
	{3, "root_context_id", func(p *Provenance) any { return &p.RootContextID }},
	{10, "trace_id", func(p *Provenance) any { return &p.TraceID }},
	{11, "span_id", func(p *Provenance) any { return &p.SpanID }},
	{12, "correlation_id", func(p *Provenance) any { return &p.CorrelationID }},
	{20, "on_behalf_of", func(p *Provenance) any { return &p.OnBehalfOf }},
	{21, "on_behalf_of_source", func(p *Provenance) any { return &p.OnBehalfOfSource }},
	{22, "on_behalf_of_email", func(p *Provenance) any { return &p.OnBehalfOfEmail }},
	{30, "writer_method", func(p *Provenance) any { return &p.WriterMethod }},
	{31, "writer_subject", func(p *Provenance) any { return &p.WriterSubject }},
	{32, "writer_issuer", func(p *Provenance) any { return &p.WriterIssuer }},
	{40, "service_name", func(p *Provenance) any { return &p.ServiceName }},
	{41, "service_version", func(p *Provenance) any { return &p.ServiceVersion }},
	{42, "service_instance_id", func(p *Provenance) any { return &p.ServiceInstanceID }},
	{43, "process_pid", func(p *Provenance) any { return &p.ProcessPID }},
	{44, "process_owner", func(p *Provenance) any { return &p.ProcessOwner }},
	{45, "host_name", func(p *Provenance) any { return &p.HostName }},
	{46, "host_arch", func(p *Provenance) any { return &p.HostArch }},
	{50, "client_address", func(p *Provenance) any { return &p.ClientAddress }},
	{51, "client_port", func(p *Provenance) any { return &p.ClientPort }},
	{60, "env", func(p *Provenance) any { return &p.Env }},
	{70, "sdk_name", func(p *Provenance) any { return &p.SDKName }},
	{71, "sdk_version", func(p *Provenance) any { return &p.SDKVersion }},
	{80, "captured_at", func(p *Provenance) any { return &p.CapturedAt }},
}

// provByTag indexes provFields by tag.
var provByTag = func() map[uint64]provField {
	m := make(map[uint64]provField, len(provFields))
	for _, f := range provFields {
		m[f.tag] = f
	}
	return m
}()

// MarshalJSON renders p as an object with all 25 keys of the §6 table in
// table order, absent fields as null, context ids as decimal strings,
// other integers as JSON numbers and env as an object (keys sorted). A nil p renders as null.
func (p *Provenance) MarshalJSON() ([]byte, error) {
	if p == nil {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range provFields {
		if i > 0 {
			b.WriteByte(',')
		}
		v, err := json.Marshal(f.ptr(p))
		if err != nil {
			return nil, err
		}
		b.WriteString(`"` + f.key + `":`)
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// provenance reads tag 10; a value that is not a map gives nil.
func (r *reader) provenance(h head, depth int) (*Provenance, error) {
	p := new(Provenance)
	isMap, err := r.eachEntry(h, depth, func(tag uint64, v head, d int) error {
		f, known := provByTag[tag]
		if !known {
			return r.Skip(v, d)
		}
		return r.provValue(f.ptr(p), v, d)
	})
	if !isMap || err != nil {
		return nil, err
	}
	return p, nil
}

// provValue reads the value h into the field ptr points to, setting it to
// nil when the value has the wrong type.
func (r *reader) provValue(ptr any, h head, depth int) (err error) {
	switch v := ptr.(type) {
	case **string:
		*v, err = r.str(h, depth)
	case **ContextID:
		var n *uint64
		if n, err = r.u64(h, depth); n != nil {
			*v = (*ContextID)(n)
		}
	case **int64:
		*v, err = r.i64(h, depth)
	case *map[string]string:
		*v, err = r.env(h, depth)
	}
	return err
}

// env reads a map of str to str, dropping other pairs; it gives nil when
// the value is not a map or keeps no pair.
func (r *reader) env(h head, depth int) (map[string]string, error) {
	var m map[string]string
	_, err := r.eachPair(h, depth, func(k, v head, d int) error {
		key, _ := r.str(k, d) // a key is read whole: nothing to skip
		val, err := r.str(v, d)
		if key == nil || val == nil || err != nil {
			return err
		}
		if m == nil {
			m = make(map[string]string)
		}
		m[*key] = *val
		return nil
	})
	return m, err
}
