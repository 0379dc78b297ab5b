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
	ID     uint64 // from 1, in publish order across tenants
	Tenant string
	Name   string
	Data   any
}

// DefaultBuffer is how many recent events a Stream keeps for clients that
// reconnect.
const DefaultBuffer = 8192

// Stream is a bounded buffer of recent events with subscribers. Publish
// never blocks on a subscriber: a subscriber that falls further behind
// than the buffer is told to reset.
type Stream struct {
	mu     sync.Mutex
	ring   []Event // ring[(id-1) % len]
	next   uint64  // id of the next event
	notify map[*Subscription]struct{}
}

// NewStream returns a stream keeping the last size events.
func NewStream(size int) *Stream {
	if size <= 0 {
		size = DefaultBuffer
	}
	return &Stream{ring: make([]Event, size), next: 1, notify: map[*Subscription]struct{}{}}
}

// Publish appends an event and wakes the subscribers.
func (s *Stream) Publish(tenant, name string, data any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.next
	s.next++
	s.ring[(id-1)%uint64(len(s.ring))] = Event{ID: id, Tenant: tenant, Name: name, Data: data}
	for sub := range s.notify {
		select {
		case sub.wake <- struct{}{}:
		default: // already woken
		}
	}
}

// LastID is the id of the newest event (0 before the first).
func (s *Stream) LastID() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next - 1
}

// Subscription reads a tenant's events in order.
type Subscription struct {
	s      *Stream
	tenant string
	after  uint64 // the last event delivered (or skipped)
	wake   chan struct{}
}

// Subscribe starts reading the tenant's events after event id after
// (LastID() for only new ones). Close it when done.
func (s *Stream) Subscribe(tenant string, after uint64) *Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := &Subscription{s: s, tenant: tenant, after: min(after, s.next-1), wake: make(chan struct{}, 1)}
	s.notify[sub] = struct{}{}
	if sub.after+1 < s.next {
		sub.wake <- struct{}{} // events to replay
	}
	return sub
}

// Close ends the subscription.
func (sub *Subscription) Close() {
	sub.s.mu.Lock()
	defer sub.s.mu.Unlock()
	delete(sub.s.notify, sub)
}

// Wake is signalled when events may be waiting.
func (sub *Subscription) Wake() <-chan struct{} { return sub.wake }

// Next returns the tenant's events published since the last call, at most
// max. reset is true when events were lost because they left the buffer
// before being read: the reader should start over (reload its state).
func (sub *Subscription) Next(max int) (events []Event, reset bool) {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	oldest := uint64(1)
	if n := uint64(len(s.ring)); s.next > n {
		oldest = s.next - n
	}
	if sub.after+1 < oldest {
		sub.after = s.next - 1
		return nil, true
	}
	for id := sub.after + 1; id < s.next && len(events) < max; id++ {
		ev := s.ring[(id-1)%uint64(len(s.ring))]
		sub.after = id
		if ev.Tenant == sub.tenant {
			events = append(events, ev)
		}
	}
	if sub.after+1 < s.next {
		// More are waiting: make sure the reader comes back.
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
	return events, false
}
