package projection

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// sameLen fails unless a Rendering's Len is what it writes.
func sameLen(t testing.TB, payload []byte, d Descriptor, reg Registry, o Options, want int) {
	t.Helper()
	r, err := Render(payload, d, reg, o, Limits{})
	if err != nil {
		t.Fatalf("payload %x: Render: %v, where Project succeeded", payload, err)
	}
	defer r.Release()
	if got := len(r.AppendUnknown(r.AppendData(nil))); r.Len() != got || got != want {
		t.Fatalf("payload %x: Len %d, wrote %d, Project wrote %d", payload, r.Len(), got, want)
	}
}

// emptyMaps is a payload whose tag 99 holds n empty maps: n+3 values in
// little more than n bytes.
func emptyMaps(n int) []byte {
	b := []byte{0x81, 99, 0xdd, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[3:], uint32(n))
	return append(b, bytes.Repeat([]byte{0x80}, n)...)
}

func TestValuesBound(t *testing.T) {
	d := Descriptor{Fields: map[uint64]Field{1: {Name: "text", Type: "string"}}}
	// At the bound: the top map, key 99, the array and its items.
	n := DefaultMaxValues - 3
	if _, err := Project(emptyMaps(n), d, nil, Options{IncludeUnknown: true}); err != nil {
		t.Fatalf("%d values: %v", DefaultMaxValues, err)
	}
	_, err := Project(emptyMaps(n+1), d, nil, Options{IncludeUnknown: true})
	var le *LimitError
	if !errors.As(err, &le) || le.Bound != "values" || le.Limit != DefaultMaxValues || !errors.Is(err, ErrLimit) || errors.Is(err, ErrDecode) {
		t.Fatalf("one value over: %v, want a values LimitError", err)
	}
	if !strings.Contains(err.Error(), "more than 262144 msgpack values") {
		t.Errorf("message %q", err)
	}
	// Unknown tags not asked for are skipped, not rendered: no bound.
	if _, err := Project(emptyMaps(n+1), d, nil, Options{}); err != nil {
		t.Fatalf("without unknowns: %v", err)
	}
	// A tighter bound.
	if _, err := Render(emptyMaps(10), d, nil, Options{IncludeUnknown: true}, Limits{MaxValues: 12}); !errors.As(err, &le) || le.Limit != 12 {
		t.Fatalf("MaxValues 12: %v", err)
	}
}

// TestTenMillionEmptyMaps is the payload that took 5 s and 800 MiB to
// render: it fails at the values bound in a few MiB.
func TestTenMillionEmptyMaps(t *testing.T) {
	payload := emptyMaps(10_000_000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := Project(payload, Descriptor{}, nil, Options{IncludeUnknown: true})
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("10M empty maps: %v, want over the bound", err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("10M empty maps: %v, %.1f MiB allocated", took, float64(alloc)/(1<<20))
	if alloc > 48<<20 {
		t.Errorf("allocated %d bytes to refuse it", alloc)
	}
}

func TestBytesBound(t *testing.T) {
	d := Descriptor{Fields: map[uint64]Field{1: {Name: "text", Type: "string"}, 2: {Name: "blob", Type: "bytes"}}}
	lim := Limits{MaxBytes: 1000}
	text := func(s string) []byte { return enc(t, map[uint64]any{1: s}) }
	if _, err := Render(text(strings.Repeat("a", 900)), d, nil, Options{}, lim); err != nil {
		t.Fatalf("900 bytes of text within 1000: %v", err)
	}
	var le *LimitError
	for name, payload := range map[string][]byte{
		"text":             text(strings.Repeat("a", 1000)),
		"escaped text":     text(strings.Repeat("\x01", 200)), // 1200 bytes as \u0001
		"bytes":            enc(t, map[uint64]any{2: bytes.Repeat([]byte{1}, 800)}),
		"unknown":          enc(t, map[uint64]any{3: strings.Repeat("a", 1000)}),
		"unknown map keys": enc(t, map[uint64]any{3: map[string]int{strings.Repeat("k", 1000): 1}}),
		"many small":       enc(t, map[uint64]any{3: make([]int, 600)}),
	} {
		_, err := Render(payload, d, nil, Options{IncludeUnknown: true}, lim)
		if !errors.As(err, &le) || le.Bound != "bytes" || le.Limit != 1000 {
			t.Errorf("%s: %v, want a bytes LimitError", name, err)
		}
	}
	// hex doubles the bytes, len_only writes a number.
	blob := enc(t, map[uint64]any{2: bytes.Repeat([]byte{1}, 600)})
	if _, err := Render(blob, d, nil, Options{Bytes: "hex"}, lim); !errors.As(err, &le) {
		t.Errorf("600 bytes as hex: %v", err)
	}
	if _, err := Render(blob, d, nil, Options{Bytes: "len_only"}, lim); err != nil {
		t.Errorf("600 bytes, len_only: %v", err)
	}
}

func TestRenderingLen(t *testing.T) {
	for _, name := range []string{"msgpack_conversation_item", "msgpack_numeric_map"} {
		payload := fixture(t, name)
		for _, o := range fuzzOptions {
			res, err := Project(payload, fullConversation.types["cxdb.ConversationItem"], fullConversation, o)
			if err != nil {
				t.Fatal(err)
			}
			sameLen(t, payload, fullConversation.types["cxdb.ConversationItem"], fullConversation, o, len(res.Data)+len(res.Unknown))
		}
	}
	payload := conversationTurn(t)
	d := fullConversation.types["cxdb.ConversationItem"]
	res, err := Project(payload, d, fullConversation, Options{IncludeUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	sameLen(t, payload, d, fullConversation, Options{IncludeUnknown: true}, len(res.Data)+len(res.Unknown))
}
