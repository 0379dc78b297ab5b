package api

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/internal/fault"
)

// Deadlines bound how long one request may hold its connection, so that a
// client sending or reading slowly, on purpose or not, cannot pin a
// connection and its memory. The server's IdleTimeout and
// ReadHeaderTimeout cover the time between requests and the headers.
type Deadlines struct {
	// BodyGrace is how long a request body may take before BodyMinRate
	// applies.
	BodyGrace time.Duration
	// BodyMinRate is the slowest average rate, in bytes per second, at
	// which a body must arrive after BodyGrace; a slower one is cut and
	// answered 408.
	BodyMinRate int64
	// Write bounds writing one response. Routes that stream (server-sent
	// events, large downloads) move it forward as they make progress, with
	// http.ResponseController.SetWriteDeadline.
	Write time.Duration
}

// DefaultDeadlines are the Deadlines when Options.Deadlines is zero.
var DefaultDeadlines = Deadlines{BodyGrace: 10 * time.Second, BodyMinRate: 4 << 10, Write: time.Minute}

// errBodyTooSlow is a body that arrived slower than BodyMinRate.
var errBodyTooSlow = fault.New(fault.RequestTimeout, "request body arrived too slowly")

// withDeadlines sets the write deadline of each response and makes the
// request body keep to the minimum rate.
func withDeadlines(d Deadlines, arriving *bodySet) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			rc := http.NewResponseController(c.Response())
			if d.Write > 0 {
				_ = rc.SetWriteDeadline(time.Now().Add(d.Write))
			}
			req := c.Request()
			if d.BodyMinRate > 0 && req.Body != nil && req.Body != http.NoBody {
				b := &minRateBody{ReadCloser: req.Body, rc: rc, d: d, start: time.Now(), set: arriving}
				arriving.add(b)
				defer arriving.remove(b)
				req.Body = b
			}
			return next(c)
		}
	}
}

// bodySet holds the request bodies still arriving, so that shutdown can
// cut them: a client still sending its request does not hold the server.
type bodySet struct {
	mu       sync.Mutex
	arriving map[*minRateBody]struct{}
	cutting  bool
}

func (s *bodySet) add(b *minRateBody) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.arriving == nil {
		s.arriving = map[*minRateBody]struct{}{}
	}
	s.arriving[b] = struct{}{}
	if s.cutting {
		b.cut.Store(true)
	}
}

func (s *bodySet) remove(b *minRateBody) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.arriving, b)
}

// cutAll ends every body still arriving, and every later one.
func (s *bodySet) cutAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cutting = true
	for b := range s.arriving {
		b.cut.Store(true)
		_ = b.rc.SetReadDeadline(time.Now())
	}
}

// minRateBody moves the connection's read deadline forward as the body
// arrives: BodyGrace plus the time BodyMinRate allows for the bytes read
// so far.
type minRateBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	d     Deadlines
	start time.Time
	read  int64
	set   *bodySet
	cut   atomic.Bool // shutdown: every read fails at once
}

// Read implements io.Reader.
func (b *minRateBody) Read(p []byte) (int, error) {
	allowed := b.d.BodyGrace + time.Duration(b.read)*time.Second/time.Duration(b.d.BodyMinRate)
	_ = b.rc.SetReadDeadline(b.start.Add(allowed))
	if b.cut.Load() { // cutAll may have run between the two lines above
		_ = b.rc.SetReadDeadline(time.Now())
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		// The whole body is in: no deadline may cut the connection's
		// background read while the handler runs, and shutdown lets the
		// request finish.
		_ = b.rc.SetReadDeadline(time.Time{})
		b.set.remove(b)
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = errBodyTooSlow
	}
	return n, err
}

// refusalBody is the body of the answer to a connection over the
// connection limit.
const refusalBody = `{"error":{"code":503,"message":"the server is at its connection limit; retry later","kind":"UNAVAILABLE"}}` + "\n"

// refusal is that whole answer.
var refusal = fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(refusalBody), refusalBody)

// RefuseConn answers a connection over the HTTP listener's connection
// limit with a 503 (see connlimit).
func RefuseConn(c net.Conn) { _, _ = io.WriteString(c, refusal) }

// plaintextBody is the body of the answer to plain HTTP on the TLS
// listener.
const plaintextBody = `{"error":{"code":400,"message":"this port speaks HTTPS only: use https://","kind":"BAD_REQUEST"}}` + "\n"

// plaintext is that whole answer.
var plaintext = fmt.Sprintf("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(plaintextBody), plaintextBody)

// RefusePlaintext answers a client that sent plain HTTP to the TLS
// listener with a 400 saying to use https (as net/http does on its own TLS
// listeners), rather than closing without a word.
func RefusePlaintext(c net.Conn) { _, _ = io.WriteString(c, plaintext) }
