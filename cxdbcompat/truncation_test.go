package cxdbcompat

import (
	"errors"
	"io"
	"testing"
)

// requestPayloads returns every fixture and sample request as a
// (type, flags, payload) triple.
func requestPayloads(tb testing.TB) []fixture {
	tb.Helper()
	var out []fixture
	for _, f := range loadFixtures(tb) {
		out = append(out, f)
	}
	for _, r := range sampleRequests() {
		out = append(out, fixture{Name: r.MsgType().String(), MsgType: r.MsgType(), Flags: r.Flags(), Payload: r.AppendTo(nil)})
	}
	return out
}

func TestRequestTruncation(t *testing.T) {
	for _, f := range requestPayloads(t) {
		for n := range len(f.Payload) {
			prefix := f.Payload[:n:n]
			_, err := DecodeRequest(f.MsgType, f.Flags, prefix)
			if n == 0 && f.MsgType == MsgHello {
				if err != nil {
					t.Errorf("%s: empty HELLO must decode as legacy: %v", f.Name, err)
				}
				continue
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: %d-byte prefix of %d: err = %v, want ErrMalformed", f.Name, n, len(f.Payload), err)
			}
		}
	}
}

func TestResponseTruncation(t *testing.T) {
	for _, tc := range responseCases() {
		payload := tc.encode()
		for n := range len(payload) {
			if _, err := tc.decode(payload[:n:n]); err != nil && !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: %d-byte prefix: err = %v, want nil or ErrMalformed", tc.name, n, err)
			}
		}
	}
}

func TestFrameTruncation(t *testing.T) {
	for _, f := range requestPayloads(t) {
		wire := AppendFrame(nil, f.MsgType, f.Flags, 1, f.Payload)
		for n := 1; n < len(wire); n++ {
			if _, err := ReadFrame(&sliceReader{b: wire[:n]}, nil); err == nil {
				t.Errorf("%s: %d-byte prefix of a %d-byte frame decoded", f.Name, n, len(wire))
			}
		}
	}
}

// sliceReader returns its bytes one at a time to exercise partial reads.
type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.b[0]
	r.b = r.b[1:]
	return 1, nil
}
