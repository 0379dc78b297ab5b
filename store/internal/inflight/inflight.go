// Package inflight tells a reader of Postgres whether some operations
// were in flight while it read: the reaper lists deleted contexts, and a
// context whose deletion is still in flight (marked deleted in Postgres,
// its dead turns not yet worked out) must not be reaped from that list.
package inflight

import "sync"

// Tracker counts the operations in flight and those begun so far. The
// zero value is ready to use.
type Tracker struct {
	mu      sync.Mutex
	running int
	begun   uint64
}

// Begin records that an operation began; the returned function records
// that it ended (call it once).
func (t *Tracker) Begin() (end func()) {
	t.mu.Lock()
	t.running++
	t.begun++
	t.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			t.running--
			t.mu.Unlock()
		})
	}
}

// Mark is what Quiet compares with: the operations begun so far, and
// whether one was in flight when it was taken.
type Mark struct {
	begun uint64
	busy  bool
}

// Mark takes a mark before a read.
func (t *Tracker) Mark() Mark {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Mark{begun: t.begun, busy: t.running > 0}
}

// Quiet reports whether no operation was in flight at any time since m
// was taken: none was when it was taken, and none began since.
func (t *Tracker) Quiet(m Mark) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !m.busy && t.begun == m.begun
}
