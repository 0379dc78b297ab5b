// Package live is what is happening now: the binary sessions that are
// connected and the stream of events (contexts created, turns appended,
// metadata found, clients connecting and leaving) that UIs follow over
// server-sent events. It keeps a bounded buffer of recent events so a
// client that reconnects gets what it missed, or learns that it missed too
// much.
package live

import (
	"sync"
)

// Event names, as the CXDB UI listens for them.
const (
	ContextCreated         = "context_created"
	TurnAppended           = "turn_appended"
	ContextMetadataUpdated = "context_metadata_updated"
	ContextDeleted         = "context_deleted"
	ClientConnected        = "client_connected"
	ClientDisconnected     = "client_disconnected"
)

// Event is one event of a tenant. Data is rendered as JSON.
type Event struct {
	ID     uint64 // from 1, in publish order within the tenant
	Tenant string
	Name   string
	Data   any
}

// DefaultBuffer is how many recent events of each tenant a Stream keeps
// for clients that reconnect.
const DefaultBuffer = 8192

// Stream is a bounded buffer of recent events per tenant, with
// subscribers. Publish never blocks on a subscriber: a subscriber that
// falls further behind than the buffer is told to reset.
//
// Each tenant has its own ids and its own buffer, so that nothing in the
// stream tells a tenant about another's activity: not the ids it sees,
// and not a reset caused by another tenant's flood of events.
type Stream struct {
	mu      sync.Mutex
	size    int
	tenants map[string]*tenantEvents
}

// tenantEvents is one tenant's buffer and subscribers.
type tenantEvents struct {
	ring []Event // ring[(id-1) % len], allocated on the first event
	next uint64  // id of the next event
	subs map[*Subscription]struct{}
}

// NewStream returns a stream keeping the last size events of each tenant.
func NewStream(size int) *Stream {
	if size <= 0 {
		size = DefaultBuffer
	}
	return &Stream{size: size, tenants: map[string]*tenantEvents{}}
}

// of returns the tenant's events; the caller holds s.mu.
func (s *Stream) of(tenant string) *tenantEvents {
	te := s.tenants[tenant]
	if te == nil {
		te = &tenantEvents{next: 1, subs: map[*Subscription]struct{}{}}
		s.tenants[tenant] = te
	}
	return te
}

// Publish appends an event to the tenant's and wakes its subscribers.
func (s *Stream) Publish(tenant, name string, data any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	te := s.of(tenant)
	if te.ring == nil {
		te.ring = make([]Event, s.size)
	}
	id := te.next
	te.next++
	te.ring[(id-1)%uint64(len(te.ring))] = Event{ID: id, Tenant: tenant, Name: name, Data: data}
	for sub := range te.subs {
		sub.signal()
	}
}

// Forget drops a deleted tenant's buffered events. Its subscribers read
// nothing more (their streams end when their keys are found gone).
func (s *Stream) Forget(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tenants, tenant)
}

// LastID is the id of the tenant's newest event (0 before the first).
func (s *Stream) LastID(tenant string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.of(tenant).next - 1
}

// Subscription reads a tenant's events in order.
type Subscription struct {
	s     *Stream
	te    *tenantEvents
	after uint64 // the last event delivered (or skipped)
	wake  chan struct{}
}

// Subscribe starts reading the tenant's events after event id after
// (LastID(tenant) for only new ones). Close it when done.
func (s *Stream) Subscribe(tenant string, after uint64) *Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	te := s.of(tenant)
	sub := &Subscription{s: s, te: te, after: min(after, te.next-1), wake: make(chan struct{}, 1)}
	te.subs[sub] = struct{}{}
	if sub.after+1 < te.next {
		sub.signal() // events to replay
	}
	return sub
}

// signal wakes the subscriber unless it is awake already.
func (sub *Subscription) signal() {
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// Close ends the subscription.
func (sub *Subscription) Close() {
	sub.s.mu.Lock()
	defer sub.s.mu.Unlock()
	delete(sub.te.subs, sub)
}

// Wake is signalled when events may be waiting.
func (sub *Subscription) Wake() <-chan struct{} { return sub.wake }

// Next returns the tenant's events published since the last call, at most
// max. reset is true when events were lost because they left the buffer
// before being read: the reader should start over (reload its state).
func (sub *Subscription) Next(max int) (events []Event, reset bool) {
	sub.s.mu.Lock()
	defer sub.s.mu.Unlock()
	te := sub.te
	oldest := uint64(1)
	if n := uint64(len(te.ring)); n > 0 && te.next > n {
		oldest = te.next - n
	}
	if sub.after+1 < oldest {
		sub.after = te.next - 1
		return nil, true
	}
	for id := sub.after + 1; id < te.next && len(events) < max; id++ {
		events = append(events, te.ring[(id-1)%uint64(len(te.ring))])
		sub.after = id
	}
	if sub.after+1 < te.next {
		sub.signal() // more are waiting: make sure the reader comes back
	}
	return events, false
}
