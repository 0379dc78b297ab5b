// Package dedupfence lets a compaction of the blob pack wait for the
// deduplications in flight: the puts and the append groups that may have
// found a blob already stored and have not yet committed (or failed)
// their claim to it. A compaction that waits for those begun before it
// started watching its segment (blobpack.Pack.BeginCompaction) knows,
// when it asks Postgres which blobs no tenant claims, that every claim
// resting on a lookup it did not watch is committed, or will never be
// (docs/storage.md, Compaction).
//
// Entering and leaving cost the writer an atomic add each, and a load: no
// lock, nothing that waits. Tickets are counted in two slots; the epoch
// says which slot a new ticket joins. Wait moves the epoch on twice,
// waiting after each move for the slot just left to empty: every ticket
// entered before Wait began sits in one of the two slots, whatever the
// moves of earlier Waits, so both are drained (tickets entered after the
// first move may be waited for too, which costs a little time, never
// correctness).
package dedupfence

import (
	"context"
	"sync"
	"sync/atomic"
)

// Fence counts the deduplications in flight. The zero Fence is ready to
// use; a nil *Fence counts nothing and waits for nothing. Safe for
// concurrent use.
type Fence struct {
	epoch   atomic.Uint64
	slots   [2]atomic.Int64
	waiting atomic.Bool
	// wakeOnce makes wake, to which a Leave that empties a slot while
	// a Wait runs sends (never blocking: it holds one token).
	wakeOnce sync.Once
	wake     chan struct{}
	mu       sync.Mutex // one Wait at a time
	// Blocked, if set, is called by Wait when it finds deduplications in
	// flight, before it waits for them. For tests; set before use.
	Blocked func()
}

// Ticket is one deduplication in flight. The zero Ticket is none.
type Ticket struct {
	f    *Fence
	slot *atomic.Int64
}

// Enter counts a deduplication in flight, before its first lookup of the
// pack's index; the caller calls Leave on the ticket once its claims are
// committed or never will be.
func (f *Fence) Enter() Ticket {
	if f == nil {
		return Ticket{}
	}
	s := &f.slots[f.epoch.Load()&1]
	s.Add(1)
	return Ticket{f: f, slot: s}
}

// Leave ends the deduplication t counts. Leaving the zero Ticket does
// nothing; a ticket must be left once.
func (t Ticket) Leave() {
	if t.slot == nil {
		return
	}
	if t.slot.Add(-1) == 0 && t.f.waiting.Load() {
		select {
		case t.f.wakeChan() <- struct{}{}:
		default:
		}
	}
}

func (f *Fence) wakeChan() chan struct{} {
	f.wakeOnce.Do(func() { f.wake = make(chan struct{}, 1) })
	return f.wake
}

// Wait returns once every deduplication that entered before Wait was
// called has left, or with ctx's error when ctx ends first.
func (f *Fence) Wait(ctx context.Context) error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	wake := f.wakeChan()
	f.waiting.Store(true) // before the slots are read: see Leave
	defer f.waiting.Store(false)
	blocked := false
	for range 2 {
		s := &f.slots[(f.epoch.Add(1)-1)&1]
		for s.Load() != 0 {
			if !blocked && f.Blocked != nil {
				blocked = true
				f.Blocked()
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// InFlight returns how many deduplications are in flight now.
func (f *Fence) InFlight() int64 {
	if f == nil {
		return 0
	}
	return f.slots[0].Load() + f.slots[1].Load()
}
