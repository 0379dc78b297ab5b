package store

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/ident"
)

// deleteBenchTurns is the depth of the context the deletion benchmark
// deletes: the size a deletion must still answer quickly for.
const deleteBenchTurns = 10_000

// BenchmarkDeleteContext10kTurns measures how long DeleteContext takes to
// answer for a context of 10,000 turns, a fork of which took its first
// half as its base: the deletion works out before it answers which of its
// turns die (the second half; the fork keeps the first alive), so the
// liveness walk does real work. What may wait (the reaper burying the
// dead turns' rows) runs after the answer and is not timed.
//
// Each iteration builds its context afresh with the timer stopped; run it
// with -benchtime 1x -count 5 (or more) to get one deletion per round.
func BenchmarkDeleteContext10kTurns(b *testing.B) {
	rb := newDeleteBench(b)
	ctx := context.Background()
	var worst time.Duration
	for b.Loop() {
		b.StopTimer()
		id, kept, died := rb.build(b)
		b.StartTimer()
		start := time.Now()
		if err := rb.e.DeleteContext(ctx, rb.tenant, id, "bench"); err != nil {
			b.Fatalf("delete context %d: %v", id, err)
		}
		worst = max(worst, time.Since(start))
		if rb.e.Dead(kept) || !rb.e.Dead(died) {
			b.Fatalf("after the deletion: fork's base turn %d dead %v (want false), head %d dead %v (want true)",
				kept, rb.e.Dead(kept), died, rb.e.Dead(died))
		}
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
}

// deleteBench is an engine for the deletion benchmark.
type deleteBench struct {
	e      *Engine
	tenant ident.Tenant
	rng    *rand.Rand
	n      int // payloads made, so that each is distinct
}

func newDeleteBench(b *testing.B) *deleteBench {
	b.Helper()
	e, t := openBenchEngine(b)
	return &deleteBench{e: e, tenant: t, rng: rand.New(rand.NewPCG(3, 4))}
}

// build appends a context of deleteBenchTurns turns, forks it at its
// middle turn with a few turns of its own, and returns the context, the
// fork's base (which the deletion must spare) and the context's head
// (which dies).
func (db *deleteBench) build(b *testing.B) (id, base, head uint64) {
	b.Helper()
	ctx := context.Background()
	h, err := db.e.CreateContext(ctx, db.tenant, 0, "")
	if err != nil {
		b.Fatal(err)
	}
	var middle uint64
	for i := range deleteBenchTurns {
		db.n++
		a, err := db.e.Append(ctx, db.tenant, turnReq(h.ContextID, 0, textPayload(db.rng, db.n)))
		if err != nil {
			b.Fatalf("append turn %d: %v", i, err)
		}
		if i == deleteBenchTurns/2-1 {
			middle = a.TurnID
		}
		head = a.TurnID
	}
	fork, err := db.e.CreateContext(ctx, db.tenant, middle, "")
	if err != nil {
		b.Fatal(err)
	}
	for range 10 {
		db.n++
		if _, err := db.e.Append(ctx, db.tenant, turnReq(fork.ContextID, 0, textPayload(db.rng, db.n))); err != nil {
			b.Fatal(err)
		}
	}
	return h.ContextID, middle, head
}
