package store

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/store/internal/putmemo"
)

// BenchmarkPutBlobAgain measures an upload of bytes the tenant stored
// already: with the memo of recorded uploads (no statement), and with
// its row of blob_puts written on every upload (one statement). It
// reports this process's CPU time per upload beside the wall time
// (Postgres's own CPU is not in it).
func BenchmarkPutBlobAgain(b *testing.B) {
	for _, bm := range []struct {
		name   string
		forget bool
	}{
		{"memo", false},
		{"row_every_put", true},
	} {
		b.Run(bm.name, func(b *testing.B) {
			e, acme := openBenchEngine(b)
			data := []byte("bytes acme uploads again and again")
			h := blake3.Sum256(data)
			ctx := context.Background()
			if _, err := e.PutBlob(ctx, acme, h, data); err != nil {
				b.Fatal(err)
			}
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				if bm.forget {
					e.puts = putmemo.New(0)
				}
				if _, err := e.PutBlob(ctx, acme, h, data); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the user and system CPU time this process used.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
