package pgembed

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A machine without PostgreSQL gets one message that names the package to
// install and the variable to set instead.
func TestMissingBinariesSayWhatToInstall(t *testing.T) {
	_, err := Start(context.Background(), Options{Dir: t.TempDir(), BinDir: t.TempDir()})
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Start with no binaries: %v", err)
	}
	for _, want := range []string{"apt-get install -y postgresql", "CARDBOX_DATABASE_URL", "CARDBOX_PG_BINDIR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not mention %q", err, want)
		}
	}
}

func TestSocketDirFitsTheKernelLimit(t *testing.T) {
	for _, dir := range []string{"/data", "/" + strings.Repeat("d", 200)} {
		if got := socketDir(dir) + "/.s.PGSQL.65535"; len(got) > 107 {
			t.Errorf("socket path for %d-byte dir is %d bytes", len(dir), len(got))
		}
	}
}
