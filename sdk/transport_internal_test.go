package sdk

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/sdk/internal/wire"
)

// countingConn counts the writes made to a connection.
type countingConn struct {
	net.Conn
	writes atomic.Int32
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestRequestsQueuedDuringAWriteGoOutTogether blocks the first request's
// write (a pipe's write waits for its reader), queues more requests
// behind it, and checks that they go out in one more write, not one each,
// and that every request gets its own answer.
func TestRequestsQueuedDuringAWriteGoOutTogether(t *testing.T) {
	client, peer := net.Pipe()
	t.Cleanup(func() { peer.Close() })
	counted := &countingConn{Conn: client}
	c := &conn{
		nc: counted, pending: map[uint64]chan wire.Frame{}, readDone: make(chan struct{}),
		wake: make(chan struct{}, 1), writeDone: make(chan struct{}),
	}
	go c.readLoop()
	go c.writeLoop()
	t.Cleanup(c.close)

	const n = 50
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	answers := make(chan error, n)
	ask := func(i int) {
		f, err := c.roundTrip(ctx, wire.MsgGetHead, 0, binary.LittleEndian.AppendUint64(nil, uint64(i)))
		if err == nil && binary.LittleEndian.Uint64(f.Payload) != uint64(i) {
			err = fmt.Errorf("request %d got the answer to %d", i, binary.LittleEndian.Uint64(f.Payload))
		}
		answers <- err
	}
	go ask(0)
	until(t, "the first request's write to start", func() bool { return counted.writes.Load() == 1 })
	for i := 1; i < n; i++ {
		go ask(i)
	}
	frameSize := wire.HeaderSize + 8
	until(t, "the other requests to queue", func() bool {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		return len(c.out.frames) == (n-1)*frameSize
	})

	// The peer echoes each request's payload as its answer.
	r := bufio.NewReader(peer)
	for range n {
		f, err := wire.ReadFrame(r)
		if err != nil {
			t.Fatalf("read request: %v", err)
		}
		answer, _ := wire.AppendFrame(nil, f.Type, 0, f.ReqID, f.Payload)
		if _, err := peer.Write(answer); err != nil {
			t.Fatalf("answer: %v", err)
		}
	}
	for range n {
		if err := <-answers; err != nil {
			t.Fatal(err)
		}
	}
	if w := counted.writes.Load(); w != 2 {
		t.Errorf("%d requests took %d writes, want 2 (the first, then the rest together)", n, w)
	}
}

// until polls cond until it holds, failing the test after 10 s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
