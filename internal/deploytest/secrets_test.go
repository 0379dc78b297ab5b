package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The secrets deploy/make-secrets.sh makes have the formats their readers
// want, in a private directory, readable by the containers' users; a
// second run keeps them.
func TestMakeSecrets(t *testing.T) {
	dir := t.TempDir()
	files := makeSecrets(t, dir)
	want := map[string]*regexp.Regexp{
		// internal/auth's key format: id of 16 hex digits, 256 random bits.
		"operator_key":      regexp.MustCompile(`^cbk_key_[0-9a-f]{16}_[A-Za-z0-9_-]{43}\n$`),
		"postgres_password": regexp.MustCompile(`^[0-9a-f]{64}\n$`),
		"cardbox_db_pgpass": regexp.MustCompile(`^\*:\*:\*:\*:[0-9a-f]{64}\n$`),
	}
	if len(files) != len(want) {
		t.Fatalf("made %v, want %d files", files, len(want))
	}
	before := map[string]string{}
	for name, re := range want {
		b, err := os.ReadFile(files[name])
		if err != nil {
			t.Fatal(err)
		}
		if !re.Match(b) {
			t.Errorf("%s = %q, want %s", name, b, re)
		}
		before[name] = string(b)
		st, err := os.Stat(files[name])
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v, want 0644 (inside a private directory)", name, st.Mode().Perm())
		}
	}
	st, err := os.Stat(filepath.Join(dir, "secrets"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("the secrets directory has mode %v, want 0700", st.Mode().Perm())
	}
	again := makeSecrets(t, dir)
	for name := range want {
		b, err := os.ReadFile(again[name])
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != before[name] {
			t.Errorf("a second run changed %s", name)
		}
	}
	// Every run makes new secrets.
	other := makeSecrets(t, t.TempDir())
	if b, _ := os.ReadFile(other["operator_key"]); string(b) == before["operator_key"] {
		t.Error("two runs made the same operator key")
	}
}

// The README's recipe for the operator key is the script's.
func TestREADMEShowsTheOperatorKeyRecipe(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(root, "deploy", "make-secrets.sh"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := ""
	for _, line := range strings.Split(string(script), "\n") {
		if strings.HasPrefix(line, "printf 'cbk_key_") {
			recipe = line
		}
	}
	if recipe == "" {
		t.Fatal("deploy/make-secrets.sh has no printf 'cbk_key_... line")
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), recipe) {
		t.Errorf("README.md does not show the operator key recipe of deploy/make-secrets.sh:\n%s", recipe)
	}
	// And the recipe alone makes a key in the format.
	out, err := exec.Command("sh", "-c", recipe).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^cbk_key_[0-9a-f]{16}_[A-Za-z0-9_-]{43}\n$`).Match(out) {
		t.Errorf("the recipe printed %q", out)
	}
}
