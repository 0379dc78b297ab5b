package analytics

import "testing"

// The queue keeps payloads up to its byte bound; past it a turn is queued
// without its payload (read back from the store later), never dropped.
func TestQueueBoundsPayloadBytes(t *testing.T) {
	q := newQueue(10, 8)
	q.push([]job{{turnID: 1, payload: []byte("12345")}, {turnID: 2, payload: []byte("1234")}, {turnID: 3, payload: []byte("123")}})
	got := q.take(10)
	if len(got) != 3 || got[0].payload == nil || got[1].payload != nil || got[2].payload == nil {
		t.Fatalf("queued %+v: want turns 1 and 3 with payloads, 2 without", got)
	}
	if q.payloads != 0 {
		t.Errorf("%d payload bytes counted in an empty queue", q.payloads)
	}
	q.push([]job{{turnID: 4, payload: []byte("12345678")}})
	if got := q.take(1); got[0].payload == nil {
		t.Error("the room taken jobs left was not given back")
	}
}
