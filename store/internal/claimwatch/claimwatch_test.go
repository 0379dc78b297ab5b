package claimwatch

import "testing"

func TestWatch(t *testing.T) {
	var w Watch
	a, b := Hash{1}, Hash{2}
	w.NotePayload(7, a, false) // nobody watched: not noted
	w.Start(7)
	if n := w.Take(7); len(n.Payloads)+len(n.Puts) != 0 || n.Unsure {
		t.Fatalf("a write before Start was noted: %+v", n)
	}
	w.NotePayload(7, a, false)
	w.NotePut(7, b)
	w.NotePayload(8, b, true) // another tenant, not watched
	n := w.Take(7)
	if !n.Named(a) || !n.Named(b) || n.Unsure {
		t.Fatalf("noted %+v; want a's payload and b's upload, sure", n)
	}
	if n := w.Take(7); n.Named(a) || n.Named(b) {
		t.Fatalf("Take did not start a new record: %+v", n)
	}
	w.NoteUnsure(7)
	if n := w.Take(7); !n.Unsure {
		t.Fatal("an fs attachment was not noted as unsure")
	}
	w.NotePayload(7, a, true)
	if n := w.Take(7); !n.Unsure || !n.Named(a) {
		t.Fatalf("an append with an fs root: %+v; want a named and unsure", n)
	}
	w.Stop(7)
	w.NotePayload(7, a, false)
	if n := w.Take(7); n.Named(a) || w.watched.Load() != 0 {
		t.Fatalf("noted after Stop: %+v, %d watched", n, w.watched.Load())
	}
}

func TestWatchCapIsUnsure(t *testing.T) {
	var w Watch
	w.Start(1)
	for i := range maxNoted + 1 {
		w.NotePut(1, Hash{byte(i), byte(i >> 8), byte(i >> 16)})
	}
	if n := w.Take(1); !n.Unsure || len(n.Puts) != maxNoted {
		t.Fatalf("past the cap: unsure %v, %d noted; want unsure and %d", n.Unsure, len(n.Puts), maxNoted)
	}
}
