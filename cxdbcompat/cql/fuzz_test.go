package cql

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzParse feeds untrusted query text to Parse: it must never panic, every
// failure must be a well-formed *Error, and any query that parses must
// evaluate against a few records.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		``, `id = 1`, `NOT (tag ^~= "a" OR label IN ('x', "y")) AND depth >= 2`,
		`created > "-7d" AND created < "2026-01-02T00:00:00Z" OR created = 17`,
		`is_live = TRUE`, `tag = "abc\`, `tag ^ "a"`, `host ~= "H" AND parent != 3`,
		`id = 5 OR tag ^~= "t" OR title ^~= "t" OR user ^~= "t" OR service ^~= "t" OR host ^~= "t" OR label = "t"`,
		`created > "-99999999999999999999999d"`, `depth = 1e9`, `id = -0.5`, "\xff = 1",
		`((((id = 1))))`, `root IN (1, "a", true)`, `created = "-0m"`,
	} {
		f.Add(seed)
	}
	records := append(testRecords(), Record{}, Record{ID: 1<<64 - 1, CreatedMs: -1, Depth: 1<<32 - 1})
	f.Fuzz(func(t *testing.T, q string) {
		parsed, err := Parse(q)
		if err != nil {
			checkError(t, q, err)
			return
		}
		for i := range records {
			parsed.Match(&records[i], testNow)
		}
		if _, total := Filter(parsed, records, testNow, 2); total > len(records) {
			t.Fatalf("total %d exceeds %d records", total, len(records))
		}
	})
}

func checkError(t *testing.T, q string, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not *Error", err)
	}
	switch e.Type {
	case TypeSyntaxError, TypeUnknownField, TypeInvalidOperator, TypeInvalidValue:
	default:
		t.Fatalf("unknown error type %q", e.Type)
	}
	if e.Message == "" {
		t.Fatal("empty message")
	}
	if p := e.Position; p != nil && (p.Offset > len(q) || p.Line < 1 || p.Column < 1 || p.Column > utf8.RuneCountInString(q)+1) {
		t.Fatalf("position %+v out of range for %d bytes", *p, len(q))
	}
	if _, jerr := json.Marshal(e); jerr != nil {
		t.Fatalf("marshal: %v", jerr)
	}
}
