package testkit_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/testkit"
)

// outcome records how a check ended a test, in place of the testing
// package's, so that a failing or skipping check can itself be tested.
type outcome struct {
	testing.TB
	failed, skipped bool
	msg             string
}

func (o *outcome) Helper() {}
func (o *outcome) Fatal(args ...any) {
	o.failed, o.msg = true, fmt.Sprint(args...)
	panic(o)
}
func (o *outcome) Fatalf(format string, args ...any) { o.Fatal(fmt.Sprintf(format, args...)) }
func (o *outcome) Skip(args ...any) {
	o.skipped, o.msg = true, fmt.Sprint(args...)
	panic(o)
}

// run calls check with o, stopping where the testing package would.
func (o *outcome) run(check func(testing.TB)) (ended *outcome) {
	defer func() {
		ended = o
		if r := recover(); r != nil && r != o {
			panic(r)
		}
	}()
	check(o)
	return o
}

func TestSkipOrFail(t *testing.T) {
	tests := []struct {
		ci          string
		wantFail    bool
		wantSkip    bool
		wantMessage string
	}{
		{ci: "1", wantFail: true, wantMessage: "no tool"},
		{ci: "", wantSkip: true, wantMessage: "WARNING: skipped: no tool"},
	}
	for _, tt := range tests {
		t.Run("CI="+tt.ci, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			o := (&outcome{TB: t}).run(func(tb testing.TB) { tb.Helper(); testkit.SkipOrFail(tb, "no %s", "tool") })
			if o.failed != tt.wantFail || o.skipped != tt.wantSkip || !strings.Contains(o.msg, tt.wantMessage) {
				t.Fatalf("failed %v, skipped %v (%q); want %v, %v (%q)", o.failed, o.skipped, o.msg, tt.wantFail, tt.wantSkip, tt.wantMessage)
			}
		})
	}
}

func TestSharedFixtures(t *testing.T) {
	shared := t.TempDir()
	types := filepath.Join(shared, "fixtures", "cxdb", "types")
	if err := os.MkdirAll(types, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(types, "one.json"), []byte(`{"payload_hex":"81a17801"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(testkit.EnvSharedDir, shared)
	t.Setenv("CI", "1")

	if got := testkit.TypePayload(t, "one"); string(got) != "\x81\xa1x\x01" {
		t.Errorf("TypePayload = %x, want 81a17801", got)
	}
	if got := testkit.CXDBFixtureFiles(t, "types"); len(got) != 1 || filepath.Base(got[0]) != "one.json" {
		t.Errorf("CXDBFixtureFiles = %v", got)
	}
	for _, tt := range []struct {
		name  string
		check func(testing.TB)
	}{
		{"an empty kind", func(tb testing.TB) { tb.Helper(); testkit.CXDBFixtures(tb, "registry") }},
		{"a missing type", func(tb testing.TB) { tb.Helper(); testkit.TypePayload(tb, "two") }},
	} {
		if o := (&outcome{TB: t}).run(tt.check); !o.failed {
			t.Errorf("%s: did not fail in CI", tt.name)
		}
	}
	t.Setenv(testkit.EnvSharedDir, filepath.Join(shared, "absent"))
	if o := (&outcome{TB: t}).run(func(tb testing.TB) { tb.Helper(); testkit.SharedDir(tb) }); !o.failed {
		t.Error("a missing shared directory did not fail in CI")
	}
	if _, ok := testkit.FindSharedDir(); ok {
		t.Error("FindSharedDir found a missing directory")
	}
}

func TestRepoRootHoldsGoMod(t *testing.T) {
	if _, err := os.Stat(filepath.Join(testkit.RepoRoot(t), "go.mod")); err != nil {
		t.Fatal(err)
	}
}
