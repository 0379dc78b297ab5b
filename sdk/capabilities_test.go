package sdk

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/sdk/internal/wire"
)

// referenceHello serves HELLO as the CXDB reference server does (10
// bytes, metadata ignored) and records every other message type it is
// sent, answering it with an empty frame of its type.
type referenceHello struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	seen []uint16
}

func startReferenceHello(t *testing.T) *referenceHello {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &referenceHello{ln: ln}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *referenceHello) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go s.serve(nc)
	}
}

func (s *referenceHello) serve(nc net.Conn) {
	defer s.wg.Done()
	defer nc.Close()
	r := bufio.NewReader(nc)
	for {
		f, err := wire.ReadFrame(r)
		if err != nil {
			return
		}
		answer := []byte{}
		if f.Type == wire.MsgHello {
			answer = append(wire.U64(1), 1, 0)
		} else {
			s.mu.Lock()
			s.seen = append(s.seen, f.Type)
			s.mu.Unlock()
		}
		out, _ := wire.AppendFrame(nil, f.Type, 0, f.ReqID, answer)
		if _, err := nc.Write(out); err != nil {
			return
		}
	}
}

// A server that announces no conditional appends is never sent one: it
// would ignore the flag and append unconditionally.
func TestConditionalAppendNeedsTheCapability(t *testing.T) {
	srv := startReferenceHello(t)
	c := NewClient(Config{BinaryAddr: srv.ln.Addr().String(), MaxAttempts: 1})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.AppendTurn(ctx, AppendRequest{ContextID: "1", TypeID: "t", Payload: []byte("x"), IfHead: true})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("conditional append to a server without the capability: %v, want ErrUnsupported", err)
	}
	if caps := c.Capabilities(); caps.ConditionalAppend {
		t.Fatalf("capabilities %+v from a 10-byte HELLO answer", caps)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.seen) != 0 {
		t.Fatalf("the server was sent message types %v", srv.seen)
	}
}

func TestParseCapabilities(t *testing.T) {
	tests := []struct {
		extra []byte
		want  Capabilities
	}{
		{nil, Capabilities{}},
		{[]byte{1, 0, 0}, Capabilities{}},
		{[]byte{1, 0, 0, 0, 0, 0, 0, 0}, Capabilities{ConditionalAppend: true}},
		{[]byte{2, 0, 0, 0, 0, 0, 0, 0, 9}, Capabilities{AppendParent: true}},
		{[]byte{3, 0, 0, 0, 0, 0, 0, 0}, Capabilities{ConditionalAppend: true, AppendParent: true}},
	}
	for _, tc := range tests {
		if got := parseCapabilities(tc.extra); got != tc.want {
			t.Errorf("parseCapabilities(%v) = %+v, want %+v", tc.extra, got, tc.want)
		}
	}
}
