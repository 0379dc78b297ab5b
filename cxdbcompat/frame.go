package cxdbcompat

import (
	"errors"
	"fmt"
	"io"
	"net"
)

const (
	// HeaderSize is the size of a frame header:
	// len:u32 | msg_type:u16 | flags:u16 | req_id:u64, little-endian.
	HeaderSize = 16
	// MaxPayload is the largest payload length accepted in a frame (64 MiB).
	MaxPayload = 64 << 20

	// readChunk is the first allocation step when a payload does not fit the
	// caller's buffer; larger payloads grow geometrically as bytes arrive,
	// so memory tracks what the peer actually sent, not what it announced.
	readChunk = 64 << 10
	// wholeAfter ends the growth: a peer that has sent this much of a
	// payload gets room for all of it at once, which spares the copies and
	// the garbage of growing a large payload step by step.
	wholeAfter = 1 << 20
)

// Frame is one protocol frame. Responses always carry Flags == 0 and echo
// the request's ReqID.
type Frame struct {
	Type    MsgType
	Flags   uint16
	ReqID   uint64
	Payload []byte
}

// ReadFrame reads one frame from r. The payload is read into buf when
// cap(buf) is large enough (so passing the previous frame's Payload back in
// reuses its memory); otherwise a new slice is allocated, growing as bytes
// arrive. Either way the returned Payload may alias buf.
//
// A header whose len exceeds MaxPayload is refused before anything is
// allocated or read: the error is a *FrameTooLargeError (errors.Is
// ErrFrameTooLarge) carrying the header fields; the stream is then out of
// sync and should be closed. A clean end of stream before the first header
// byte returns io.EOF itself; a stream ending inside a frame returns an
// error wrapping io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, buf []byte) (Frame, error) {
	return ReadFrameReserving(r, buf, nil)
}

// ReadFrameReserving is ReadFrame that calls reserve(n) before it makes
// room for n more payload bytes, so that a server can count the memory a
// frame holds while it arrives, and stop reading (reserve blocks) or give
// up (reserve fails) when a budget is spent. Room is made in the steps the
// bytes arrive in, so a peer that announces 64 MiB and sends 1 KiB is
// charged about 64 KiB. A nil reserve allows everything.
func ReadFrameReserving(r io.Reader, buf []byte, reserve func(n int) error) (Frame, error) {
	var hdr [HeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return Frame{}, io.EOF
		}
		return Frame{}, fmt.Errorf("read frame header: %w", err)
	}
	n, f := parseHeader(&hdr)
	if n > MaxPayload {
		return Frame{}, &FrameTooLargeError{Len: uint64(n), Type: f.Type, Flags: f.Flags, ReqID: f.ReqID}
	}
	p, err := readPayload(r, buf, int(n), reserve)
	if err != nil {
		return Frame{}, fmt.Errorf("read %s frame payload (%d bytes): %w", f.Type, n, err)
	}
	f.Payload = p
	return f, nil
}

func parseHeader(h *[HeaderSize]byte) (uint32, Frame) {
	return le.Uint32(h[0:4]), Frame{
		Type:  MsgType(le.Uint16(h[4:6])),
		Flags: le.Uint16(h[6:8]),
		ReqID: le.Uint64(h[8:16]),
	}
}

// readPayload reads exactly n bytes. It reuses buf when it is large enough
// and otherwise grows a new slice geometrically while data arrives; reserve
// (if not nil) is told of each growth first.
func readPayload(r io.Reader, buf []byte, n int, reserve func(int) error) ([]byte, error) {
	if reserve == nil {
		reserve = func(int) error { return nil }
	}
	if n <= cap(buf) {
		if err := reserve(n); err != nil {
			return nil, err
		}
		p := buf[:n]
		_, err := io.ReadFull(r, p)
		return p, noEOF(err)
	}
	var p []byte
	for len(p) < n {
		want := min(n, max(2*len(p), readChunk))
		if len(p) >= wholeAfter {
			want = n
		}
		if err := reserve(want - len(p)); err != nil {
			return nil, err
		}
		grown := make([]byte, len(p), want)
		copy(grown, p)
		m, err := io.ReadFull(r, grown[len(p):want])
		p = grown[:len(p)+m]
		if err != nil {
			return nil, noEOF(err)
		}
	}
	return p, nil
}

// noEOF turns io.EOF into io.ErrUnexpectedEOF: once a header was read, a
// missing payload is never a clean end of stream.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendFrame appends a complete frame (header and payload) to dst. The
// caller must keep len(payload) <= MaxPayload or peers will reject the
// frame; FinishFrame and WriteFrame check this.
func AppendFrame(dst []byte, typ MsgType, flags uint16, reqID uint64, payload []byte) []byte {
	dst = appendHeader(dst, uint32(len(payload)), typ, flags, reqID)
	return append(dst, payload...)
}

// StartFrame appends a frame header with a placeholder length to dst and
// returns the extended slice and the header's offset. Append the payload to
// the returned slice, then call FinishFrame with that offset.
func StartFrame(dst []byte, typ MsgType, flags uint16, reqID uint64) ([]byte, int) {
	return appendHeader(dst, 0, typ, flags, reqID), len(dst)
}

// FinishFrame patches the length of the frame started at offset start (as
// returned by StartFrame) to cover everything appended after its header.
// It fails with a *FrameTooLargeError if the payload exceeds MaxPayload.
func FinishFrame(buf []byte, start int) ([]byte, error) {
	if start < 0 || len(buf)-start < HeaderSize {
		return buf, fmt.Errorf("finish frame: no frame header at offset %d", start)
	}
	n := len(buf) - start - HeaderSize
	if n > MaxPayload {
		var hdr [HeaderSize]byte
		copy(hdr[:], buf[start:])
		_, f := parseHeader(&hdr)
		return buf, &FrameTooLargeError{Len: uint64(n), Type: f.Type, Flags: f.Flags, ReqID: f.ReqID}
	}
	le.PutUint32(buf[start:], uint32(n))
	return buf, nil
}

// WriteFrame writes one frame to w, using a single vectored write when w
// supports it. It refuses payloads larger than MaxPayload.
func WriteFrame(w io.Writer, typ MsgType, flags uint16, reqID uint64, payload []byte) error {
	if len(payload) > MaxPayload {
		return &FrameTooLargeError{Len: uint64(len(payload)), Type: typ, Flags: flags, ReqID: reqID}
	}
	hdr := appendHeader(make([]byte, 0, HeaderSize), uint32(len(payload)), typ, flags, reqID)
	bufs := net.Buffers{hdr, payload}
	if _, err := bufs.WriteTo(w); err != nil {
		return fmt.Errorf("write %s frame: %w", typ, err)
	}
	return nil
}

func appendHeader(dst []byte, n uint32, typ MsgType, flags uint16, reqID uint64) []byte {
	dst = appendU32(dst, n)
	dst = appendU16(dst, uint16(typ))
	dst = appendU16(dst, flags)
	return appendU64(dst, reqID)
}
