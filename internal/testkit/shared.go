package testkit

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// EnvSharedDir names the variable that says where the shared material
// (the CXDB fixtures, the official CXDB client) is when it is not
// ../shared beside the repository.
const EnvSharedDir = "CARDBOX_SHARED_DIR"

// RepoRoot returns the repository's root: the nearest directory above the
// test's working directory that holds go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// FindRepoRoot is RepoRoot for code that runs outside a test's goroutine
// or before one (a build shared by a test binary's tests).
func FindRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// FindSharedDir returns the shared directory, CARDBOX_SHARED_DIR or else
// ../shared beside the repository, and whether it exists. It is for what
// may do without it (a fuzz test's extra seeds); a test that needs it
// calls SharedDir.
func FindSharedDir() (string, bool) {
	dir := os.Getenv(EnvSharedDir)
	if dir == "" {
		root, err := FindRepoRoot()
		if err != nil {
			return "", false
		}
		dir = filepath.Join(root, "..", "shared")
	}
	_, err := os.Stat(dir)
	return dir, err == nil
}

// SharedDir returns the shared directory, and SkipOrFail's the test when
// it is missing.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir, ok := FindSharedDir()
	if !ok {
		SkipOrFail(t, "the shared directory %q is missing (set %s)", dir, EnvSharedDir)
	}
	return dir
}

// CXDBFixtures returns the directory of one kind of shared CXDB fixture
// (fixtures/cxdb/<kind>: protocol, registry, types, …), and SkipOrFail's
// the test when it is missing or empty.
func CXDBFixtures(t testing.TB, kind string) string {
	t.Helper()
	dir := filepath.Join(SharedDir(t), "fixtures", "cxdb", kind)
	if paths, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(paths) == 0 {
		SkipOrFail(t, "no shared CXDB fixtures in %s (set %s)", dir, EnvSharedDir)
	}
	return dir
}

// CXDBFixtureFiles returns the JSON files of one kind of shared CXDB
// fixture, sorted, and SkipOrFail's the test when there are none.
func CXDBFixtureFiles(t testing.TB, kind string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(CXDBFixtures(t, kind), "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// TypePayload returns the msgpack payload of the shared type fixture
// fixtures/cxdb/types/<name>.json (its payload_hex).
func TypePayload(t testing.TB, name string) []byte {
	t.Helper()
	path := filepath.Join(CXDBFixtures(t, "types"), name+".json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		PayloadHex string `json:"payload_hex"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := hex.DecodeString(f.PayloadHex)
	if err != nil {
		t.Fatalf("%s: payload_hex: %v", path, err)
	}
	return b
}
