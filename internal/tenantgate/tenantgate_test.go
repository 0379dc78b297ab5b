package tenantgate

import (
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	var g Gate[string]
	if g.Gone("acme") || !g.Enter("acme") {
		t.Fatal("an open gate refused acme")
	}
	g.Leave()
	if !g.Close("acme") || g.Close("acme") {
		t.Fatal("Close: want true the first time only")
	}
	if !g.Gone("acme") || g.Enter("acme") {
		t.Fatal("a closed gate admitted acme")
	}
	if g.Gone("bravo") || !g.Enter("bravo") {
		t.Fatal("acme's closed gate refused bravo")
	}
	g.Leave()
	if n := g.CloseAll([]string{"acme", "bravo", "charlie", "bravo"}); n != 2 || !g.Gone("bravo") || !g.Gone("charlie") || !g.Gone("acme") {
		t.Fatalf("CloseAll closed %d, want bravo and charlie", n)
	}
}

// Close waits for the writes admitted before it.
func TestCloseWaitsForAdmittedWrites(t *testing.T) {
	var g Gate[uint32]
	if !g.Enter(7) {
		t.Fatal("refused")
	}
	closed := make(chan struct{})
	go func() {
		g.Close(7)
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a write was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	g.Leave()
	<-closed
	if g.Enter(7) {
		t.Fatal("admitted after Close")
	}
}
