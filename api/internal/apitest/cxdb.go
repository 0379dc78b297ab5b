// Package apitest is the test harness of the HTTP route groups: a whole
// server as cardboxd runs it (internal/daemon) seen through its CXDB API
// (CXDB) or its CardBox API on a clock of the test's (CardBox), requests
// and their answers, and checks of each exchange against
// docs/openapi.yaml (Spec, DocCheck).
package apitest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/membudget"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/store"
)

// CXDB is a running cardbox: the daemon cardboxd runs (turn store
// on real files and a fresh Postgres database, the CXDB and CardBox
// services, the binary listener and the HTTP API, background work).
type CXDB struct {
	T      testing.TB
	URL    string
	Binary string
	Engine *store.Engine
	Svc    *service.Service
	Keys   *tenancy.Admin // hosted mode only
	Bin    *server.Server

	cards   *cardbox.Service
	handler *api.Handler
}

// Options vary the harness.
type Options struct {
	Hosted     bool          // API keys on both surfaces (h.keys)
	Heartbeat  time.Duration // of event streams
	AnswerWait time.Duration // for room in the answer budget (cxdbhttp.Options.AnswerWait)
	// answers, when set, is the answer budget of the HTTP routes instead
	// of the binary server's.
	Answers *membudget.Budget
	// dir and pool, when set, are the turn store's data directory and
	// database (a store a test prepared); else fresh ones.
	Dir  string
	Pool *pgxpool.Pool
}

// NewCXDB starts a whole server in dev mode.
func NewCXDB(t testing.TB) *CXDB {
	t.Helper()
	return NewCXDBWith(t, Options{})
}

// NewCXDBWith starts a whole server as o says.
func NewCXDBWith(t testing.TB, o Options) *CXDB {
	t.Helper()
	cfg := daemontest.Config(t)
	if o.Dir != "" {
		cfg.DataDir = o.Dir
	}
	if o.Hosted {
		cfg.Mode = daemon.ModeHosted
	}
	cfg.Pool = o.Pool
	cfg.Test.Heartbeat, cfg.Test.AnswerWait, cfg.Test.Answers = o.Heartbeat, o.AnswerWait, o.Answers
	d := daemontest.Start(t, cfg)
	return &CXDB{
		T: t, URL: "http://" + d.HTTPAddr(), Binary: d.BinaryAddr(),
		Engine: d.Store(), Svc: d.CXDB(), Keys: d.Tenancy(), Bin: d.Binary(),
		cards: d.CardBox(), handler: d.Handler(),
	}
}

// Client dials the binary listener.
func (h *CXDB) Client(opts ...client.Option) *client.Client {
	h.T.Helper()
	c, err := client.Dial(context.Background(), h.Binary, opts...)
	if err != nil {
		h.T.Fatal(err)
	}
	h.T.Cleanup(func() { c.Close() })
	return c
}

// Call sends a request with an optional body (a string sent as is, or a
// value encoded as JSON) and headers given as name, value pairs.
func (h *CXDB) Call(method, path string, body any, headers ...string) Response {
	h.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = strings.NewReader(string(b))
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			h.T.Fatal(err)
		}
		rd = strings.NewReader(string(buf))
	}
	req, err := http.NewRequest(method, h.URL+path, rd)
	if err != nil {
		h.T.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.T.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		h.T.Fatal(err)
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: out}
}

// Get is Call with GET and no body.
func (h *CXDB) Get(path string, headers ...string) Response {
	h.T.Helper()
	return h.Call(http.MethodGet, path, nil, headers...)
}

// PublishConversationBundle publishes the canonical conversation types.
func (h *CXDB) PublishConversationBundle() {
	h.T.Helper()
	h.Call(http.MethodPut, "/v1/registry/bundles/"+registry.ConversationBundleID, registry.ConversationBundle).Want(h.T, http.StatusCreated)
}

// SSEEvent is one server-sent event.
type SSEEvent struct {
	ID, Name string
	Data     map[string]any
}

// SSEStream reads server-sent events.
type SSEStream struct {
	T      testing.TB
	res    *http.Response
	lines  *bufio.Scanner
	cancel context.CancelFunc
}

// Events opens GET /v1/events, optionally resuming after lastID, with
// the headers given as name, value pairs.
func (h *CXDB) Events(lastID string, headers ...string) *SSEStream {
	h.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL+"/v1/events", nil)
	if err != nil {
		h.T.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.T.Fatal(err)
	}
	h.T.Cleanup(func() { cancel(); res.Body.Close() })
	return &SSEStream{T: h.T, res: res, lines: bufio.NewScanner(res.Body), cancel: cancel}
}

// Next reads the next event (comments skipped).
func (s *SSEStream) Next() SSEEvent {
	s.T.Helper()
	var ev SSEEvent
	for s.lines.Scan() {
		line := s.lines.Text()
		switch {
		case line == "":
			if ev.Name != "" {
				return ev
			}
		case strings.HasPrefix(line, "id: "):
			ev.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.Data); err != nil {
				s.T.Fatalf("event data: %v", err)
			}
		}
	}
	s.T.Fatalf("event stream ended: %v", s.lines.Err())
	return ev
}

// HTTP is the stream's HTTP response (its body is the stream).
func (s *SSEStream) HTTP() *http.Response { return s.res }

// Drain reads the stream until it ends.
func (s *SSEStream) Drain() {
	for s.lines.Scan() {
	}
}

// Until reads events until one named name arrives, and returns it.
func (s *SSEStream) Until(name string) SSEEvent {
	s.T.Helper()
	for {
		if ev := s.Next(); ev.Name == name {
			return ev
		}
	}
}
