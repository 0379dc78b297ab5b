package fstree_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/sdk"
	"github.com/cardboxhq/cardbox/sdk/fstree"
	"github.com/cardboxhq/cardbox/sdk/internal/cardboxd"
)

// workspace writes files small source-like files in 100 directories.
func workspace(tb testing.TB, files int) string {
	tb.Helper()
	dir := tb.TempDir()
	for i := range files {
		d := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%100))
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		body := fmt.Sprintf("package pkg%02d\n\n// file %d of the workspace\nfunc F%d() int { return %d }\n", i%100, i, i, i)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.go", i)), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// BenchmarkCaptureUnchanged10000 captures and uploads a 10,000-file
// workspace the server already holds: each iteration walks and hashes
// every file, asks which blobs are missing, and uploads nothing
// (docs/performance.md: at most 1 s).
func BenchmarkCaptureUnchanged10000(b *testing.B) {
	srv := cardboxd.Start(b)
	ctx := context.Background()
	c, err := sdk.Dial(ctx, sdk.Config{BinaryAddr: srv.BinAddr, HTTPURL: srv.HTTPURL})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	dir := workspace(b, 10_000)
	first, err := fstree.Capture(dir, fstree.Policy{})
	if err != nil {
		b.Fatal(err)
	}
	if st, err := first.Upload(ctx, c); err != nil || st.Uploaded != st.Blobs {
		b.Fatalf("first upload: %+v %v", st, err)
	}
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		snap, err := fstree.Capture(dir, fstree.Policy{})
		if err != nil {
			b.Fatal(err)
		}
		st, err := snap.Upload(ctx, c)
		if err != nil {
			b.Fatal(err)
		}
		if st.Uploaded != 0 || snap.Root != first.Root {
			b.Fatalf("an unchanged workspace uploaded %d blobs (root %s, first %s)", st.Uploaded, snap.Root, first.Root)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/capture")
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	cardboxd.RemoveBuild() // the benchmark's cardboxd
	os.Exit(code)
}
