package fstree_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/sdk/fstree"
)

// tree makes files (path → content; content "->x" makes a symlink to x)
// under a new directory.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, full)
		} else {
			err = os.WriteFile(full, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPolicyViolationsAreErrors(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		policy fstree.Policy
		want   error
		path   string
	}{
		{"file too large", map[string]string{"a": "12345", "b": "123456"}, fstree.Policy{MaxFileSize: 5}, fstree.ErrFileTooLarge, "b"},
		{"too many files", map[string]string{"a": "", "b": "", "c": ""}, fstree.Policy{MaxFiles: 2}, fstree.ErrTooManyFiles, "c"},
		{"too deep", map[string]string{"x/y/z/f": ""}, fstree.Policy{MaxDepth: 2}, fstree.ErrTooDeep, "x/y/z"},
		{"cycle through a followed link", map[string]string{"d/f": "", "d/up": "->.."}, fstree.Policy{FollowSymlinks: true}, fstree.ErrCyclicLink, "d/up"},
		{"link loop followed", map[string]string{"a": "->b", "b": "->a"}, fstree.Policy{FollowSymlinks: true}, fstree.ErrCyclicLink, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fstree.Capture(tree(t, tt.files), tt.policy)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			var pe *fstree.PolicyError
			if !errors.As(err, &pe) || pe.Path != tt.path {
				t.Fatalf("got %#v, want a *PolicyError for %s", err, tt.path)
			}
		})
	}
}

func TestPolicyPatterns(t *testing.T) {
	dir := tree(t, map[string]string{
		"main.go": "", "main_test.go": "", "debug.log": "", "node_modules/x/y.js": "", "docs/a.md": "", "docs/b.txt": "",
	})
	tests := []struct {
		name   string
		policy fstree.Policy
		want   []string
	}{
		{"everything", fstree.Policy{}, []string{"debug.log", "docs/a.md", "docs/b.txt", "main.go", "main_test.go", "node_modules/x/y.js"}},
		{"exclude", fstree.Policy{Exclude: []string{"*.log", "node_modules/**"}}, []string{"docs/a.md", "docs/b.txt", "main.go", "main_test.go"}},
		{"include", fstree.Policy{Include: []string{"*.go", "docs/**"}, Exclude: []string{"*_test.go"}}, []string{"docs/a.md", "docs/b.txt", "main.go"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := fstree.Capture(dir, tt.policy)
			if err != nil {
				t.Fatal(err)
			}
			if got := files(t, s); strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("files %v, want %v", got, tt.want)
			}
		})
	}
}

// files lists a snapshot's files by walking its trees.
func files(t *testing.T, s *fstree.Snapshot) []string {
	t.Helper()
	var out []string
	var walk func(h, prefix string)
	walk = func(h, prefix string) {
		entries, err := fstree.DecodeTree(s.Trees[fstreeHash(h)])
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := prefix + e.Name
			switch e.Kind {
			case fstree.Directory:
				walk(hexOf(e.Hash), p+"/")
			case fstree.File:
				out = append(out, p)
			}
		}
	}
	walk(string(s.Root), "")
	return out
}

func TestSymlinksAreRecordedNotFollowed(t *testing.T) {
	s, err := fstree.Capture(tree(t, map[string]string{"f": "x", "self": "->.", "gone": "->/nowhere"}), fstree.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Stats.SymlinkCount != 2 || s.Stats.FileCount != 1 || s.Stats.DirCount != 1 {
		t.Fatalf("stats %+v", s.Stats)
	}
	targets := map[string]bool{}
	for _, v := range s.Symlinks {
		targets[v] = true
	}
	if !targets["."] || !targets["/nowhere"] {
		t.Fatalf("symlink targets %v", targets)
	}
}

func TestSameDirectorySameRoot(t *testing.T) {
	files := map[string]string{"b": "2", "a/c": "3", "a/d": "->c"}
	a, err := fstree.Capture(tree(t, files), fstree.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := fstree.Capture(tree(t, files), fstree.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Root != b.Root {
		t.Fatalf("roots %s and %s differ", a.Root, b.Root)
	}
}

// TestTreeBytesMatchOfficialClient runs the module internal/officialtree,
// which captures directories with the official CXDB Go client and with
// this package and compares the bytes, with the client taken from
// CARDBOX_SHARED_DIR (../shared beside the repository by default). In CI
// a missing client fails; elsewhere the test is skipped, saying so.
func TestTreeBytesMatchOfficialClient(t *testing.T) {
	shared := os.Getenv("CARDBOX_SHARED_DIR")
	if shared == "" {
		shared = "../../../shared"
	}
	client, err := filepath.Abs(filepath.Join(shared, "vendor", "cxdb-go-client"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(client, "go.mod")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the official client is not at %s (set CARDBOX_SHARED_DIR): %v", client, err)
		}
		t.Skipf("SKIPPED: the official client is not at %s (set CARDBOX_SHARED_DIR)", client)
	}
	tmp := t.TempDir()
	mod := filepath.Join("..", "internal", "officialtree")
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(mod, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) {
		cmd := exec.Command("go", args...)
		cmd.Dir = mod
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("mod", "edit", "-modfile="+filepath.Join(tmp, "go.mod"), "-replace=github.com/strongdm/ai-cxdb/clients/go="+client)
	run("test", "-count=1", "-modfile="+filepath.Join(tmp, "go.mod"), "./...")
}

// FuzzDecodeTree decodes arbitrary bytes as a tree object (what GetBlob
// returns for an fs root): it may fail, never panic, and what it decodes
// encodes again.
func FuzzDecodeTree(f *testing.F) {
	b, _ := fstree.EncodeTree([]fstree.Entry{{Name: "a", Kind: fstree.File, Mode: 0o644, Size: 1}})
	f.Add(b)
	f.Add([]byte{0xc0})
	f.Add([]byte{0x91, 0x80})
	f.Fuzz(func(t *testing.T, p []byte) {
		entries, err := fstree.DecodeTree(p)
		if err != nil {
			return
		}
		if _, err := fstree.EncodeTree(entries); err != nil {
			t.Fatalf("decoded entries do not encode: %v", err)
		}
	})
}

// A length header longer than the bytes left is refused before decoding,
// which would otherwise allocate what the header announces.
func TestDecodeTreeRefusesLyingLengths(t *testing.T) {
	for name, b := range map[string][]byte{
		"array32 of 4G entries": {0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0},
		"str32 of 4 GB":         {0x91, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
		"bin32 of 4 GB":         {0x91, 0xc6, 0xff, 0xff, 0xff, 0xff, 'a'},
		"map32 of 4G pairs":     {0x91, 0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0},
		"nested array16 of 64K": {0x91, 0x91, 0xdc, 0xff, 0xff, 0xc0},
		"header cut short":      {0x91, 0xdb, 0xff},
		"reserved byte 0xc1":    {0x91, 0xc1},
	} {
		if _, err := fstree.DecodeTree(b); err == nil {
			t.Errorf("%s: decoded, want an error", name)
		}
	}
}
