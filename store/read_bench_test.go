package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// benchContexts and benchDepth shape the read benchmarks like `cardbox
// bench`: 64 contexts of 1 KiB text payloads, read ten turns at a time.
const (
	benchContexts = 64
	benchDepth    = 20
	benchPayload  = 1024
)

// readBench is an engine filled for the read benchmarks.
type readBench struct {
	e        *Engine
	tenant   ident.Tenant
	contexts []uint64
}

// openBenchEngine opens an engine on a fresh database and directory,
// with the default tenant, for a benchmark.
func openBenchEngine(b *testing.B) (*Engine, ident.Tenant) {
	b.Helper()
	ctx := context.Background()
	pool := pgtest.NewPool(b)
	e, err := Open(ctx, Options{Dir: b.TempDir(), Pool: pool})
	if err != nil {
		b.Fatalf("open store: %v", err)
	}
	b.Cleanup(func() { e.Close() })
	if _, err := pool.Exec(ctx, `INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING`, ident.DefaultTenantID); err != nil {
		b.Fatal(err)
	}
	t, err := e.Tenant(ctx, ident.DefaultTenantID)
	if err != nil {
		b.Fatal(err)
	}
	return e, t
}

func newReadBench(b *testing.B) *readBench {
	b.Helper()
	ctx := context.Background()
	e, t := openBenchEngine(b)
	rb := &readBench{e: e, tenant: t}
	rng := rand.New(rand.NewPCG(1, 2))
	for range benchContexts {
		h, err := e.CreateContext(ctx, t, 0, "")
		if err != nil {
			b.Fatal(err)
		}
		rb.contexts = append(rb.contexts, h.ContextID)
	}
	for d := range benchDepth {
		for i, c := range rb.contexts {
			p := textPayload(rng, d*benchContexts+i)
			if _, err := e.Append(ctx, t, turnReq(c, 0, p)); err != nil {
				b.Fatal(err)
			}
		}
	}
	return rb
}

// textPayload returns a distinct, compressible payload of benchPayload
// bytes, like a conversation item.
func textPayload(rng *rand.Rand, n int) []byte {
	words := strings.Fields("the agent reads a file then calls a tool and writes the answer with context tokens model user")
	var s strings.Builder
	fmt.Fprintf(&s, "%d ", n)
	for s.Len() < benchPayload {
		s.WriteString(words[rng.IntN(len(words))])
		s.WriteByte(' ')
	}
	return []byte(s.String()[:benchPayload])
}

// BenchmarkLast measures Last(10, with payload) across contexts from
// parallel readers, as GET_LAST serves it.
func BenchmarkLast(b *testing.B) {
	rb := newReadBench(b)
	for _, payload := range []bool{true, false} {
		b.Run(fmt.Sprintf("payload=%v", payload), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for i := 0; pb.Next(); i++ {
					turns, err := rb.e.Last(ctx, rb.tenant, rb.contexts[i%len(rb.contexts)], 10, payload)
					if err != nil || len(turns) != 10 {
						b.Errorf("last: %d turns, %v", len(turns), err)
						return
					}
					if payload && i%1024 == 0 && blake3.Sum256(turns[9].Payload) != turns[9].Hash {
						b.Errorf("payload of turn %d does not match its hash", turns[9].ID)
						return
					}
				}
			})
		})
	}
}
