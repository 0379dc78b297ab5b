package api_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/cardboxhttp"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// TestSlowBodyIsCut trickles a body far below the minimum rate: the
// server answers 408 long before the body would have finished, and stores
// nothing; a body at a normal pace is served.
func TestSlowBodyIsCut(t *testing.T) {
	svc := cardbox.New(pgtest.NewPool(t), cardbox.Options{})
	srv := httptest.NewServer(api.New(api.Options{
		Routes:    []api.Routes{cardboxhttp.New(svc)},
		Deadlines: api.Deadlines{BodyGrace: time.Second, BodyMinRate: 1000, Write: 5 * time.Second},
	}))
	t.Cleanup(srv.Close)
	body := `{"card_id":"slow","content":"` + strings.Repeat("x", 200) + `","metadata":{"type":"task.instruction"}}`

	start := time.Now()
	status, err := postTrickled(srv.Listener.Addr().String(), body, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// At 50 bytes/s the body needs about 5 s; the server may allow
	// 1 s + bytes/1000 s.
	if elapsed := time.Since(start); status != http.StatusRequestTimeout || elapsed > 3*time.Second {
		t.Fatalf("trickled body: status %d after %v, want 408 well before the body ends", status, elapsed)
	}
	res, err := http.Get(srv.URL + "/projects/p1/cards/slow")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("the cut write stored a card: GET answered %d", res.StatusCode)
	}
	res, err = http.Post(srv.URL+"/projects/p1/cards", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("a body at a normal pace: status %d", res.StatusCode)
	}
}

// postTrickled sends body one byte per interval and returns the status of
// the answer, which may come before the body is done.
func postTrickled(addr, body string, interval time.Duration) (int, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "POST /projects/p1/cards HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body)); err != nil {
		return 0, err
	}
	answered := make(chan struct{})
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; i < len(body); i++ {
			select {
			case <-answered:
				return
			case <-tick.C:
			}
			if _, err := c.Write([]byte{body[i]}); err != nil {
				return // the server cut the connection
			}
		}
	}()
	defer close(answered)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, fmt.Errorf("read answer: %w", err)
	}
	res.Body.Close()
	return res.StatusCode, nil
}
