package live

import (
	"context"
	"testing"
	"time"
)

func names(evs []Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Name + ":" + e.Tenant
	}
	return out
}

func TestStreamDeliversOnlyTheTenantsEventsInOrder(t *testing.T) {
	s := NewStream(16)
	sub := s.Subscribe("a", s.LastID("a"))
	t.Cleanup(sub.Close)
	s.Publish("a", "one", nil)
	s.Publish("b", "other", nil)
	s.Publish("a", "two", nil)
	select {
	case <-sub.Wake():
	default:
		t.Fatal("subscriber not woken")
	}
	evs, reset := sub.Next(10)
	if reset || len(evs) != 2 || evs[0].Name != "one" || evs[1].Name != "two" || evs[1].ID != 2 {
		t.Fatalf("got %v reset=%v", names(evs), reset)
	}
	if evs, _ := sub.Next(10); len(evs) != 0 {
		t.Fatalf("delivered twice: %v", names(evs))
	}
}

// Ids and buffers are per tenant: another tenant's events, however many,
// neither show in the ids a tenant sees nor push its events out.
func TestStreamKeepsTenantsApart(t *testing.T) {
	s := NewStream(4)
	sub := s.Subscribe("a", 0)
	t.Cleanup(sub.Close)
	s.Publish("a", "mine", nil)
	for range 100 {
		s.Publish("b", "flood", nil)
	}
	s.Publish("a", "mine too", nil)
	evs, reset := sub.Next(10)
	if reset || len(evs) != 2 || evs[0].ID != 1 || evs[1].ID != 2 {
		t.Fatalf("got %v (ids %v) reset=%v", names(evs), evs, reset)
	}
	if s.LastID("a") != 2 || s.LastID("b") != 100 || s.LastID("c") != 0 {
		t.Errorf("last ids a=%d b=%d c=%d", s.LastID("a"), s.LastID("b"), s.LastID("c"))
	}
}

func TestStreamReplaysFromAnIDStillBuffered(t *testing.T) {
	s := NewStream(4)
	for range 3 {
		s.Publish("a", "e", nil)
	}
	sub := s.Subscribe("a", 1) // saw event 1
	t.Cleanup(sub.Close)
	evs, reset := sub.Next(10)
	if reset || len(evs) != 2 || evs[0].ID != 2 {
		t.Fatalf("got %v reset=%v", evs, reset)
	}
}

func TestStreamResetsAReaderThatFellOutOfTheBuffer(t *testing.T) {
	s := NewStream(4)
	sub := s.Subscribe("a", 0)
	t.Cleanup(sub.Close)
	for range 6 {
		s.Publish("a", "e", nil)
	}
	if _, reset := sub.Next(10); !reset {
		t.Fatal("no reset after losing events")
	}
	s.Publish("a", "later", nil)
	evs, reset := sub.Next(10)
	if reset || len(evs) != 1 || evs[0].Name != "later" {
		t.Fatalf("after reset got %v reset=%v", names(evs), reset)
	}
}

// TestStreamTenantsAreAlone: another tenant's events neither advance a
// tenant's ids nor push its events out of the buffer, nor wake its
// subscribers.
func TestStreamTenantsAreAlone(t *testing.T) {
	s := NewStream(4)
	s.Publish("a", "mine", nil)
	sub := s.Subscribe("a", 0)
	t.Cleanup(sub.Close)
	<-sub.Wake()
	for range 10 {
		s.Publish("b", "busy", nil)
	}
	select {
	case <-sub.Wake():
		t.Fatal("woken by another tenant's events")
	default:
	}
	if s.LastID("a") != 1 || s.LastID("b") != 10 || s.LastID("c") != 0 {
		t.Fatalf("last ids a=%d b=%d c=%d", s.LastID("a"), s.LastID("b"), s.LastID("c"))
	}
	evs, reset := sub.Next(10)
	if reset || len(evs) != 1 || evs[0].Name != "mine" || evs[0].ID != 1 {
		t.Fatalf("got %v reset=%v", names(evs), reset)
	}
}

func TestStreamMaxLeavesTheRestForTheNextCall(t *testing.T) {
	s := NewStream(16)
	sub := s.Subscribe("a", 0)
	t.Cleanup(sub.Close)
	for range 5 {
		s.Publish("a", "e", nil)
	}
	<-sub.Wake()
	first, _ := sub.Next(3)
	select {
	case <-sub.Wake():
	default:
		t.Fatal("not woken for the remaining events")
	}
	rest, _ := sub.Next(3)
	if len(first) != 3 || len(rest) != 2 || rest[1].ID != 5 {
		t.Fatalf("first %d rest %d", len(first), len(rest))
	}
}

func TestHubTracksSessionsAndTheirContexts(t *testing.T) {
	h := NewHub(16)
	sub := h.Stream.Subscribe("a", 0)
	t.Cleanup(sub.Close)
	s := &Session{ID: 7, Tenant: "a", ClientTag: "bot", ConnectedAt: time.Now()}
	h.Connect(s)
	h.Created(7, 42)
	if c, ok := h.Creator(42); !ok || c.ID != 7 {
		t.Fatal("creator not recorded")
	}
	if got := h.Sessions("a"); len(got) != 1 || len(h.Sessions("b")) != 0 {
		t.Fatalf("sessions: %d", len(got))
	}
	h.Disconnect(7)
	if _, ok := h.Creator(42); ok {
		t.Fatal("creator kept after disconnect")
	}
	evs, _ := sub.Next(10)
	if len(evs) != 2 || evs[1].Name != ClientDisconnected {
		t.Fatalf("events %v", names(evs))
	}
	if ctxs := evs[1].Data.(map[string]any)["contexts"].([]string); len(ctxs) != 1 || ctxs[0] != "42" {
		t.Fatalf("disconnected contexts %v", ctxs)
	}
	if got, ok := SessionFrom(WithSession(context.Background(), s)); !ok || got != s {
		t.Fatal("session not carried by the context")
	}
}

func TestSubscribingBehindIsWokenToReplay(t *testing.T) {
	s := NewStream(8)
	s.Publish("a", "missed", nil)
	sub := s.Subscribe("a", 0)
	t.Cleanup(sub.Close)
	select {
	case <-sub.Wake():
	default:
		t.Fatal("a subscriber with events to replay is not woken")
	}
}

// Forget drops a deleted tenant's buffer: a later stream of that name
// starts empty, and other tenants keep theirs.
func TestStreamForget(t *testing.T) {
	s := NewStream(4)
	s.Publish("a", "gone", nil)
	s.Publish("b", "kept", nil)
	s.Forget("a")
	if s.LastID("a") != 0 || s.LastID("b") != 1 {
		t.Fatalf("after Forget: last ids a=%d b=%d, want 0 and 1", s.LastID("a"), s.LastID("b"))
	}
	sub := s.Subscribe("a", 0)
	t.Cleanup(sub.Close)
	if evs, _ := sub.Next(10); len(evs) != 0 {
		t.Fatalf("a forgotten tenant's events replayed: %v", names(evs))
	}
}
