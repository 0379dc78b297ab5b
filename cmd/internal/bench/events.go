package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/loadgen"
)

// appendLog records when each append was sent. Each appender owns one
// context and appends to it in order, so the turn at depth d of context c
// is that appender's d-th append: the events subscriber needs no turn id
// to find its send time.
type appendLog struct {
	mu   sync.Mutex
	sent map[uint64][]time.Time // by context: send time of depth i+1
}

func (l *appendLog) record(contextID uint64, t time.Time) {
	l.mu.Lock()
	l.sent[contextID] = append(l.sent[contextID], t)
	l.mu.Unlock()
}

func (l *appendLog) sentAt(contextID uint64, depth uint32) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sent[contextID]
	if depth == 0 || int(depth) > len(s) {
		return time.Time{}, false
	}
	return s[depth-1], true
}

// eventsGrace is how long the subscriber may take, after the last append,
// to see the last events before the rest count as missed.
const eventsGrace = 2 * time.Second

// eventsPhase subscribes to /v1/events, has cfg.Appenders binary
// connections append to their own contexts, and measures from sending
// each append to the subscriber reading its turn_appended event.
func eventsPhase(ctx context.Context, cfg *HTTPConfig, client *http.Client, base string, r *benchHTTPResult) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body, err := subscribe(ctx, client, base)
	if err != nil {
		return err
	}
	defer body.Close()
	sub := &subscriber{log: &appendLog{sent: map[uint64][]time.Time{}}, done: make(chan struct{})}
	sub.target.Store(-1)
	go sub.read(bufio.NewReader(body))
	start := time.Now()
	appendLat, err := appendLoad(ctx, cfg, sub.log)
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	sub.expect(int64(len(appendLat)))
	select {
	case <-sub.done:
	case <-time.After(eventsGrace):
	}
	cancel()
	body.Close()
	<-sub.done
	if sub.err != nil && !errors.Is(sub.err, context.Canceled) && ctx.Err() == nil {
		return sub.err
	}
	r.AppendsPerSec = float64(len(appendLat)) / elapsed.Seconds()
	_, r.AppendP99Ms, _ = percentiles(appendLat)
	r.EventsSeen = len(sub.delays)
	r.EventsMissed = len(appendLat) - len(sub.delays)
	r.EventP50Ms, r.EventP99Ms, r.EventP999Ms = percentiles(sub.delays)
	return nil
}

// subscribe opens the event stream and checks it is one.
func subscribe(ctx context.Context, client *http.Client, base string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/events", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /v1/events: %w", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("GET /v1/events: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	return resp.Body, nil
}

// subscriber reads turn_appended events and measures each one's delay
// from its append's send time. It stops at the first error or once it has
// seen the number of events expect sets.
type subscriber struct {
	log    *appendLog
	target atomic.Int64 // events to see before stopping; -1 until known
	seen   atomic.Int64
	delays []time.Duration
	err    error
	done   chan struct{}
}

// expect sets how many events to wait for.
func (s *subscriber) expect(n int64) { s.target.Store(n) }

func (s *subscriber) read(br *bufio.Reader) {
	defer close(s.done)
	var name string
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			s.err = err
			return
		}
		now := time.Now()
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			name = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")) && name == "turn_appended":
			if s.err = s.appended(line[len("data: "):], now); s.err != nil {
				return
			}
		case bytes.HasPrefix(line, []byte("data: ")) && name == "reset":
			s.err = fmt.Errorf("the subscriber fell behind the server's event buffer: %s", line)
			return
		}
		if t := s.target.Load(); t >= 0 && s.seen.Load() >= t {
			return
		}
	}
}

// appended records one turn_appended event read at now.
func (s *subscriber) appended(data []byte, now time.Time) error {
	var ev struct {
		ContextID string `json:"context_id"`
		Depth     uint32 `json:"depth"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return fmt.Errorf("turn_appended data %q: %w", data, err)
	}
	id, err := strconv.ParseUint(ev.ContextID, 10, 64)
	if err != nil {
		return fmt.Errorf("turn_appended context_id %q: %w", ev.ContextID, err)
	}
	if sent, ok := s.log.sentAt(id, ev.Depth); ok {
		s.delays = append(s.delays, now.Sub(sent))
		s.seen.Add(1)
	}
	return nil
}

// appendLoad has cfg.Appenders connections each create a context and
// append to it for cfg.EventsDuration, logging every send time, and
// returns the append latencies.
func appendLoad(ctx context.Context, cfg *HTTPConfig, log *appendLog) ([]time.Duration, error) {
	lat := make([][]time.Duration, cfg.Appenders)
	errs := make([]error, cfg.Appenders)
	deadline := time.Now().Add(cfg.EventsDuration)
	var wg sync.WaitGroup
	for w := range cfg.Appenders {
		wg.Go(func() { lat[w], errs[w] = appendUntil(ctx, cfg, log, uint64(w)+100, deadline) })
	}
	wg.Wait()
	return flatten(lat), firstError(errs)
}

func appendUntil(ctx context.Context, cfg *HTTPConfig, log *appendLog, seed uint64, deadline time.Time) ([]time.Duration, error) {
	c, err := loadgen.Dial(ctx, cfg.Addr, "")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	id, err := c.CreateContext()
	if err != nil {
		return nil, err
	}
	gen := newPayloadGen(cfg.Size, seed)
	var lat []time.Duration
	for time.Now().Before(deadline) {
		p := gen.next()
		t0 := time.Now()
		log.record(id, t0)
		if err := c.AppendTurn(id, p); err != nil {
			return lat, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}
