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
	ClientConnected        = "client_connected"
	ClientDisconnected     = "client_disconnected"
)

// Event is one event of a tenant. Data is rendered as JSON.
type Event struct {
	ID     uint64 // from 1, in publish order, counted per tenant
	Tenant string
	Name   string
	Data   any
}

// DefaultBuffer is how many recent events a Stream keeps per tenant for
// clients that reconnect.
const DefaultBuffer = 8192

// Stream keeps each tenant's recent events, in a bounded buffer of its
// own, and their subscribers. A tenant's events are numbered on their own
// and only its events share its buffer, so neither an event id nor a
// reset tells a tenant anything of another's activity (hosted mode, issue
// 9). Publish never blocks on a subscriber: a subscriber that falls
// further behind than the buffer is told to reset.
type Stream struct {
	mu      sync.Mutex
	size    int
	tenants map[string]*tenantLog
}

// tenantLog is one tenant's events and subscribers. Its ring grows with
// the tenant's events up to the stream's size, so a quiet tenant costs
// little.
type tenantLog struct {
	ring   []Event // ring[(id-1) % size]
	next   uint64  // id of the next event
	notify map[*Subscription]struct{}
}

// NewStream returns a stream keeping the last size events of each tenant.
func NewStream(size int) *Stream {
	if size <= 0 {
		size = DefaultBuffer
	}
	return &Stream{size: size, tenants: map[string]*tenantLog{}}
}

// log returns the tenant's log, made on first use; the caller holds mu.
func (s *Stream) log(tenant string) *tenantLog {
	l, ok := s.tenants[tenant]
	if !ok {
		l = &tenantLog{next: 1, notify: map[*Subscription]struct{}{}}
		s.tenants[tenant] = l
	}
	return l
}

// event returns the buffered event id of l; the caller holds mu.
func (s *Stream) event(l *tenantLog, id uint64) Event {
	return l.ring[(id-1)%uint64(s.size)]
}

// Publish appends an event of the tenant and wakes its subscribers.
func (s *Stream) Publish(tenant, name string, data any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.log(tenant)
	ev := Event{ID: l.next, Tenant: tenant, Name: name, Data: data}
	l.next++
	if len(l.ring) < s.size {
		l.ring = append(l.ring, ev) // ids 1..size fill slots 0..size-1
	} else {
		l.ring[(ev.ID-1)%uint64(s.size)] = ev
	}
	for sub := range l.notify {
		select {
		case sub.wake <- struct{}{}:
		default: // already woken
		}
	}
}

// LastID is the id of the tenant's newest event (0 before its first).
func (s *Stream) LastID(tenant string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.tenants[tenant]; ok {
		return l.next - 1
	}
	return 0
}

// Subscription reads a tenant's events in order.
type Subscription struct {
	s     *Stream
	log   *tenantLog
	after uint64 // the last event delivered (or skipped)
	wake  chan struct{}
}

// Subscribe starts reading the tenant's events after event id after
// (LastID(tenant) for only new ones). Close it when done.
func (s *Stream) Subscribe(tenant string, after uint64) *Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.log(tenant)
	sub := &Subscription{s: s, log: l, after: min(after, l.next-1), wake: make(chan struct{}, 1)}
	l.notify[sub] = struct{}{}
	if sub.after+1 < l.next {
		sub.wake <- struct{}{} // events to replay
	}
	return sub
}

// Close ends the subscription.
func (sub *Subscription) Close() {
	sub.s.mu.Lock()
	defer sub.s.mu.Unlock()
	delete(sub.log.notify, sub)
}

// Wake is signalled when events may be waiting.
func (sub *Subscription) Wake() <-chan struct{} { return sub.wake }

// Next returns the tenant's events published since the last call, at most
// max. reset is true when events were lost because they left the buffer
// before being read: the reader should start over (reload its state).
func (sub *Subscription) Next(max int) (events []Event, reset bool) {
	s, l := sub.s, sub.log
	s.mu.Lock()
	defer s.mu.Unlock()
	oldest := uint64(1)
	if n := uint64(s.size); l.next > n {
		oldest = l.next - n
	}
	if sub.after+1 < oldest {
		sub.after = l.next - 1
		return nil, true
	}
	for id := sub.after + 1; id < l.next && len(events) < max; id++ {
		events = append(events, s.event(l, id))
		sub.after = id
	}
	if sub.after+1 < l.next {
		// More are waiting: make sure the reader comes back.
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
	return events, false
}
