package server_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// responseTypes are the msg types a server may send.
var responseTypes = map[cxdbcompat.MsgType]bool{
	cxdbcompat.MsgHello: true, cxdbcompat.MsgCtxCreate: true, cxdbcompat.MsgCtxFork: true,
	cxdbcompat.MsgGetHead: true, cxdbcompat.MsgAppendTurn: true, cxdbcompat.MsgGetLast: true,
	cxdbcompat.MsgGetBefore: true, cxdbcompat.MsgGetBlob: true, cxdbcompat.MsgAttachFS: true,
	cxdbcompat.MsgPutBlob: true, cxdbcompat.MsgError: true,
}

// feed writes data on a fresh connection, ends the stream and reads until
// the server closes: every frame that comes back must be a well-formed
// response, and the server must close (not hang) once the input ends.
func feed(t testing.TB, addr string, data []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(ioTimeout))
	go func() {
		// The server may stop reading (oversize frame), so the write may
		// fail; the end of the stream is what matters.
		if _, err := conn.Write(data); err == nil {
			_ = conn.(*net.TCPConn).CloseWrite()
		}
	}()
	r := bufio.NewReader(conn)
	for {
		f, err := cxdbcompat.ReadFrame(r, nil)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("server neither answered nor closed within %v (input %x)", ioTimeout, truncate(data))
			}
			return // closed (a reset after unread input is fine)
		}
		if f.Flags != 0 || !responseTypes[f.Type] {
			t.Fatalf("bad response frame %s flags %d (input %x)", f.Type, f.Flags, truncate(data))
		}
		if f.Type == cxdbcompat.MsgError {
			er, err := cxdbcompat.DecodeErrorResponse(f.Payload)
			if err != nil || er.Kind == "" {
				t.Fatalf("bad ERROR frame %x: %v (input %x)", f.Payload, err, truncate(data))
			}
			if er.Code >= 500 {
				t.Fatalf("input caused ERROR %d %s: %s (input %x)", er.Code, er.Kind, er.Message, truncate(data))
			}
		}
	}
}

func truncate(b []byte) []byte { return b[:min(len(b), 256)] }

// fuzzEnv is a server for random input.
func fuzzEnv(t testing.TB) *env {
	t.Helper()
	return newEnv(t)
}

// fuzzSeeds are streams of frames built from valid requests, so that
// mutations reach the handlers and the store, not only the framing.
func fuzzSeeds(t testing.TB) [][]byte {
	t.Helper()
	var all, seeds [][]byte
	fx := loadFixtures(t)
	names := slices.Sorted(maps.Keys(fx))
	for _, name := range names {
		f := fx[name]
		fr := cxdbcompat.AppendFrame(nil, f.MsgType, f.Flags, 7, f.Payload)
		seeds = append(seeds, fr)
		all = append(all, fr)
	}
	var stream []byte
	for _, fr := range all {
		stream = append(stream, fr...)
	}
	seeds = append(seeds, stream)
	get := cxdbcompat.AppendFrame(nil, cxdbcompat.MsgGetBefore, 0, 8, cxdbcompat.GetBeforeRequest{ContextID: 1, BeforeTurnID: 1, Limit: 3, IncludePayload: true}.AppendTo(nil))
	seeds = append(seeds, get, []byte{}, []byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0})
	return seeds
}

// mutate returns a randomly damaged copy of seed: flipped bytes, a cut, a
// random header, random garbage.
func mutate(rng *rand.Rand, seed []byte) []byte {
	b := append([]byte(nil), seed...)
	switch rng.IntN(6) {
	case 0: // pure noise
		b = make([]byte, rng.IntN(512))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	case 1: // flip bytes
		for range 1 + rng.IntN(8) {
			if len(b) > 0 {
				b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
			}
		}
	case 2: // cut
		if len(b) > 0 {
			b = b[:rng.IntN(len(b))]
		}
	case 3: // rewrite the header's type and flags, keeping the length right
		if len(b) >= cxdbcompat.HeaderSize {
			binary.LittleEndian.PutUint16(b[4:], uint16(rng.IntN(14)))
			binary.LittleEndian.PutUint16(b[6:], uint16(rng.Uint32()))
		}
	case 4: // damage a length field inside the payload
		if len(b) > cxdbcompat.HeaderSize+4 {
			i := cxdbcompat.HeaderSize + rng.IntN(len(b)-cxdbcompat.HeaderSize-3)
			binary.LittleEndian.PutUint32(b[i:], rng.Uint32()>>rng.IntN(32))
		}
	case 5: // append noise after the frame
		for range rng.IntN(64) {
			b = append(b, byte(rng.Uint32()))
		}
	}
	return b
}

// TestRandomInputNeverBreaksTheServer feeds hundreds of random and damaged
// streams, each on its own connection, then checks the server still
// serves.
func TestRandomInputNeverBreaksTheServer(t *testing.T) {
	t.Parallel()
	e := fuzzEnv(t)
	seeds := fuzzSeeds(t)
	rng := rand.New(rand.NewPCG(2026, 9))
	// A session with a context 1 and a turn, so damaged requests find
	// something to hit.
	c := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	c.expectOK(cxdbcompat.MsgAppendTurn, 0, appendReq(h.ContextID, 0, []byte{0x91, 0x01}).AppendTo(nil))
	for range 300 {
		in := mutate(rng, seeds[rng.IntN(len(seeds))])
		if rng.IntN(4) == 0 { // several damaged frames on one connection
			in = append(in, mutate(rng, seeds[rng.IntN(len(seeds))])...)
		}
		feed(t, e.addr, in)
	}
	e.requireServing()
	c.expectOK(cxdbcompat.MsgGetHead, 0, u64(h.ContextID))
}

// FuzzServerConn feeds arbitrary bytes to one connection of a live server
// on a real store. Run it with
//
//	go test -run '^$' -fuzz '^FuzzServerConn$' -fuzztime 30s ./cxdbcompat/server
func FuzzServerConn(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	e := fuzzEnv(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		feed(t, e.addr, data)
		e.on(t).requireServing()
	})
}
