package registry

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// bundle builds a bundle body from the inner text of its types and enums
// objects.
func bundle(id, types, enums string) []byte {
	return []byte(fmt.Sprintf(`{"registry_version":1,"bundle_id":%q,"types":{%s},"enums":{%s}}`, id, types, enums))
}

// typ is one type entry with one version.
func typ(id string, version uint32, fields string) string {
	return fmt.Sprintf(`%q:{"versions":{"%d":{"fields":{%s}}}}`, id, version, fields)
}

// mustApply applies bodies in order, failing on any error.
func mustApply(t testing.TB, r *Registry, bodies ...[]byte) *Registry {
	t.Helper()
	for _, b := range bodies {
		next, _, err := r.Apply(b)
		if err != nil {
			t.Fatalf("Apply(%s): %v", b, err)
		}
		r = next
	}
	return r
}

// dump renders everything a snapshot answers, for equality checks.
func dump(t testing.TB, r *Registry) string {
	t.Helper()
	var sb strings.Builder
	fmt.Fprintf(&sb, "gen=%d last=%q bundles=%d types=%d\n", r.Generation(), r.LastBundleID(), r.BundleCount(), r.TypeCount())
	for _, ts := range r.Types() {
		for _, v := range ts.Versions {
			d, _ := r.Descriptor(ts.TypeID, v)
			js, err := DescriptorJSON(d)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&sb, "%s@%d %s\n", ts.TypeID, v, js)
		}
	}
	js, err := r.RenderersJSON()
	if err != nil {
		t.Fatal(err)
	}
	enums, _ := json.Marshal(r.enums)
	fmt.Fprintf(&sb, "%s\n%s\n", js, enums)
	return sb.String()
}
