// Package putmemo remembers when the uploads of blobs (PUT_BLOB) were
// last recorded in Postgres (blob_puts), so that an upload of bytes whose
// row is recent enough need not write it again: the row keeps the
// tenant's claim for the grace period from its time, and a row younger
// than a fraction of the grace still keeps it for most of the grace.
//
// The memo is bounded: when full it forgets the entries no longer fresh,
// and if none are, it stops remembering new ones (their uploads write
// their rows every time, as without a memo). It is empty at every start.
package putmemo

import (
	"sync"
	"time"

	"github.com/cardboxhq/cardbox/internal/ident"
)

// DefaultMax is how many uploads a memo remembers at most (about 70
// bytes each).
const DefaultMax = 1 << 18

type key struct {
	tenant uint32
	hash   ident.Hash
}

// Memo remembers recorded uploads. Safe for concurrent use.
type Memo struct {
	mu  sync.Mutex
	max int
	m   map[key]int64 // when the row was written, in Unix nanoseconds
	// noPruneBefore is when the oldest entry a full memo kept goes
	// stale: until then a full memo is not searched again.
	noPruneBefore int64
}

// New returns an empty memo of at most max entries (DefaultMax if max
// is 0 or less).
func New(max int) *Memo {
	if max <= 0 {
		max = DefaultMax
	}
	return &Memo{max: max, m: map[key]int64{}}
}

// Fresh reports whether the upload of h by tenant was recorded less than
// within before now.
func (m *Memo) Fresh(tenant uint32, h ident.Hash, now time.Time, within time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.m[key{tenant, h}]
	return ok && now.UnixNano()-at < int64(within)
}

// Note records that the upload of h by tenant was written at at; entries
// older than within before at are forgotten when the memo is full.
func (m *Memo) Note(tenant uint32, h ident.Hash, at time.Time, within time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{tenant, h}
	if _, ok := m.m[k]; !ok && len(m.m) >= m.max {
		if at.UnixNano() < m.noPruneBefore {
			return
		}
		cutoff := at.UnixNano() - int64(within)
		oldest := at.UnixNano()
		for x, t := range m.m {
			if t <= cutoff {
				delete(m.m, x)
			} else {
				oldest = min(oldest, t)
			}
		}
		if len(m.m) >= m.max {
			m.noPruneBefore = oldest + int64(within)
			return
		}
	}
	if old, ok := m.m[k]; !ok || at.UnixNano() > old {
		m.m[k] = at.UnixNano()
	}
}

// Len returns how many uploads the memo remembers.
func (m *Memo) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
