package registry

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cardboxhq/cardbox/internal/testkit"
)

// FuzzParse feeds untrusted bytes to Parse and Apply: they must never
// panic, must fail only with the two error kinds, and Apply must be
// deterministic and idempotent.
func FuzzParse(f *testing.F) {
	seeds := []string{
		`{"registry_version":1,"bundle_id":"b"}`,
		`{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"fields":{"1":{"name":"a","type":"array","items":{"type":"ref","ref":"T"}}}}}}}}`,
		`{"registry_version":1,"bundle_id":"cxdb-conversation-v3","types":{"cxdb.UserInput":{"versions":{"1":{"fields":{"1":{"name":"text","type":"u64"}}}}}}}`,
		`{"registry_version":1,"bundle_id":"b","enums":{"E":{"1":"one"}},"types":{"T":{"versions":{"2":{"fields":{"1":{"name":"a","type":"u8","enum":"E"}}}}}}}`,
		`{"registry_version":0,"bundle_id":"b","types":[]}`,
		`[1,{"a":null}]`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	paths, _ := filepath.Glob("testdata/*.json")
	// The shared bundles are extra seeds: the fuzz test runs without them.
	var fixtures []string
	if shared, ok := testkit.FindSharedDir(); ok {
		fixtures, _ = filepath.Glob(filepath.Join(shared, "fixtures", "cxdb", "registry", "*.json"))
	}
	base := Empty()
	for _, p := range append(paths, fixtures...) {
		if raw, err := os.ReadFile(p); err == nil {
			f.Add(raw)
			if next, _, err := base.Apply(raw); err == nil {
				base = next
			}
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, perr := Parse(body)
		if perr != nil && !errors.Is(perr, ErrMalformed) {
			t.Fatalf("Parse error of another kind: %v", perr)
		}
		for _, r := range []*Registry{Empty(), base} {
			checkApply(t, r, body, perr)
		}
	})
}

// checkApply applies body twice to r and once more to the result.
func checkApply(t *testing.T, r *Registry, body []byte, perr error) {
	t.Helper()
	before := dump(t, r)
	n1, c1, e1 := r.Apply(body)
	n2, c2, e2 := r.Apply(body)
	if c1 != c2 || errString(e1) != errString(e2) || dump(t, n1) != dump(t, n2) {
		t.Fatalf("Apply not deterministic: %v/%v %v/%v", c1, c2, e1, e2)
	}
	if dump(t, r) != before {
		t.Fatal("Apply changed its receiver")
	}
	if perr != nil && e1 == nil {
		t.Fatalf("Apply accepted what Parse refused: %v", perr)
	}
	if e1 != nil {
		if !errors.Is(e1, ErrMalformed) && !errors.Is(e1, ErrConflict) || n1 != r || c1 {
			t.Fatalf("Apply error %v: created=%v, same=%v", e1, c1, n1 == r)
		}
		return
	}
	n3, c3, e3 := n1.Apply(body)
	if e3 != nil || c3 || n3 != n1 {
		t.Fatalf("republish: created=%v err=%v", c3, e3)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
