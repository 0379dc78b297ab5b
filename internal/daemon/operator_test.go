package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadSecretFileTrimsWhitespace(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{
		"cbk_key_0123456789abcdef_x\n":     "cbk_key_0123456789abcdef_x",
		"  cbk_key_0123456789abcdef_x\r\n": "cbk_key_0123456789abcdef_x",
		"cbk_key_0123456789abcdef_x":       "cbk_key_0123456789abcdef_x",
	} {
		file := filepath.Join(dir, "secret")
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readSecretFile(file)
		if err != nil || got != want {
			t.Errorf("file %q: %q, %v; want %q", content, got, err, want)
		}
	}
}

func TestReadSecretFileRefusesWhatIsNoSecret(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"empty":    "",
		"blank":    " \n\t\n",
		"too long": strings.Repeat("x", maxSecretFile+1),
	} {
		file := filepath.Join(dir, "secret")
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := readSecretFile(file); err == nil {
			t.Errorf("%s file: %q, want an error", name, got)
		} else if strings.Contains(err.Error(), "xxxx") {
			t.Errorf("%s file: the error quotes the content: %v", name, err)
		}
	}
	if _, err := readSecretFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file: no error")
	}
}

// Dev mode has no keys: a secret file given to it is a mistake to report,
// not to ignore.
func TestOperatorKeyFileInDevModeIsAnError(t *testing.T) {
	cfg := &Config{Mode: ModeDev, OperatorKeyFile: filepath.Join(t.TempDir(), "operator_key")}
	err := access{}.ensureOperatorKey(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "hosted mode") {
		t.Fatalf("--operator-key-file in dev mode: %v, want an error naming hosted mode", err)
	}
	if err := (access{}).ensureOperatorKey(context.Background(), &Config{Mode: ModeDev}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("no --operator-key-file: %v", err)
	}
}
