// Package claimwatch records what a tenant's writes may make it need
// while a release of its blob claims is worked out: the release reads
// what the tenant needs outside the write gate, and must not release a
// claim that a write admitted meanwhile relies on. Recording the blobs
// the writes name, rather than only that the tenant wrote, lets a
// release go on beside a tenant that never stops writing: only a write
// naming one of the blobs being released, or one whose needs are not
// known by name (an fs root: whatever its tree reaches), makes it try
// again.
package claimwatch

import (
	"sync"
	"sync/atomic"
)

// Hash names a blob (BLAKE3-256).
type Hash = [32]byte

// maxNoted caps the blobs noted for one tenant between two Takes; past
// it the record says Unsure, so memory stays bounded.
const maxNoted = 1 << 20

// Noted is what a tenant's writes named since the last Take.
type Noted struct {
	Payloads map[Hash]struct{} // payloads of appended turns
	Puts     map[Hash]struct{} // blobs uploaded (PUT_BLOB)
	// Unsure: a write may make the tenant need blobs it did not name
	// (an fs root attached or appended), or too many were noted.
	Unsure bool
}

// Named reports whether h is among the blobs noted.
func (n *Noted) Named(h Hash) bool {
	_, p := n.Payloads[h]
	_, u := n.Puts[h]
	return p || u
}

// Watch records the writes of the tenants being watched. Its zero value
// watches nobody. A write of a tenant nobody watches costs one atomic
// load.
type Watch struct {
	watched atomic.Int32 // tenants watched; 0: Note returns at once
	mu      sync.Mutex
	tenants map[uint32]*Noted
}

// Start watches tenant's writes from now on. Call it while no write is
// in flight (tenantgate.Gate.Quiesce), so that every later write is
// noted.
func (w *Watch) Start(tenant uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tenants == nil {
		w.tenants = map[uint32]*Noted{}
	}
	if _, ok := w.tenants[tenant]; !ok {
		w.tenants[tenant] = newNoted()
		w.watched.Add(1)
	}
}

// Stop ends the watch of tenant.
func (w *Watch) Stop(tenant uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.tenants[tenant]; ok {
		delete(w.tenants, tenant)
		w.watched.Add(-1)
	}
}

// Take returns what tenant's writes named since Start or the last Take,
// and starts a new record. Call it while no write is in flight, for a
// clean cut.
func (w *Watch) Take(tenant uint32) Noted {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, ok := w.tenants[tenant]
	if !ok {
		return Noted{}
	}
	w.tenants[tenant] = newNoted()
	return *n
}

// NotePayload notes an append of tenant with payload h; unsure if the
// append attaches an fs root.
func (w *Watch) NotePayload(tenant uint32, h Hash, unsure bool) {
	w.note(tenant, func(n *Noted) {
		n.Payloads[h] = struct{}{}
		n.Unsure = n.Unsure || unsure
	})
}

// NotePut notes an upload of h by tenant.
func (w *Watch) NotePut(tenant uint32, h Hash) {
	w.note(tenant, func(n *Noted) { n.Puts[h] = struct{}{} })
}

// NoteUnsure notes a write of tenant whose needs are not known by name
// (an fs root attached to a turn).
func (w *Watch) NoteUnsure(tenant uint32) {
	w.note(tenant, func(n *Noted) { n.Unsure = true })
}

func (w *Watch) note(tenant uint32, f func(*Noted)) {
	if w.watched.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n, ok := w.tenants[tenant]
	if !ok {
		return
	}
	if len(n.Payloads)+len(n.Puts) >= maxNoted {
		n.Unsure = true
		return
	}
	f(n)
}

func newNoted() *Noted {
	return &Noted{Payloads: map[Hash]struct{}{}, Puts: map[Hash]struct{}{}}
}
