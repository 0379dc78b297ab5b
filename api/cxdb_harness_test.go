package api_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/membudget"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
)

// cxdbHarness is a running cardbox: the daemon cardboxd runs (turn store
// on real files and a fresh Postgres database, the CXDB and CardBox
// services, the binary listener and the HTTP API, background work).
type cxdbHarness struct {
	t      testing.TB
	url    string
	binary string
	engine *store.Engine
	svc    *service.Service
	keys   *tenancy.Admin // hosted mode only
	bin    *server.Server
}

// harnessOptions vary the harness.
type harnessOptions struct {
	hosted     bool          // API keys on both surfaces (h.keys)
	heartbeat  time.Duration // of event streams
	answerWait time.Duration // for room in the answer budget (api.CXDBOptions.AnswerWait)
	// answers, when set, is the answer budget of the HTTP routes instead
	// of the binary server's.
	answers *membudget.Budget
	// dir and pool, when set, are the turn store's data directory and
	// database (a store a test prepared); else fresh ones.
	dir  string
	pool *pgxpool.Pool
}

func newCXDBHarness(t testing.TB) *cxdbHarness { return newCXDBHarnessWith(t, harnessOptions{}) }

func newCXDBHarnessWith(t testing.TB, o harnessOptions) *cxdbHarness {
	t.Helper()
	cfg := daemontest.Config(t)
	if o.dir != "" {
		cfg.DataDir = o.dir
	}
	if o.hosted {
		cfg.Mode = daemon.ModeHosted
	}
	cfg.Pool = o.pool
	cfg.Test.Heartbeat, cfg.Test.AnswerWait, cfg.Test.Answers = o.heartbeat, o.answerWait, o.answers
	d := daemontest.Start(t, cfg)
	return &cxdbHarness{
		t: t, url: "http://" + d.HTTPAddr(), binary: d.BinaryAddr(),
		engine: d.Store(), svc: d.CXDB(), keys: d.Tenancy(), bin: d.Binary(),
	}
}

// client dials the binary listener.
func (h *cxdbHarness) client(opts ...client.Option) *client.Client {
	h.t.Helper()
	c, err := client.Dial(context.Background(), h.binary, opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// call sends a request with an optional body (a string sent as is, or a
// value encoded as JSON) and headers given as name, value pairs.
func (h *cxdbHarness) call(method, path string, body any, headers ...string) response {
	h.t.Helper()
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
			h.t.Fatal(err)
		}
		rd = strings.NewReader(string(buf))
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: out}
}

func (h *cxdbHarness) get(path string, headers ...string) response {
	h.t.Helper()
	return h.call(http.MethodGet, path, nil, headers...)
}

// publishConversationBundle publishes the canonical conversation types.
func (h *cxdbHarness) publishConversationBundle() {
	h.t.Helper()
	h.call(http.MethodPut, "/v1/registry/bundles/"+registry.ConversationBundleID, registry.ConversationBundle).want(h.t, http.StatusCreated)
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, what, 10*time.Second, cond)
}

// sharedFixture reads a payload fixture of ../shared/fixtures/cxdb/types.
func sharedFixture(t testing.TB, name string) []byte {
	t.Helper()
	dir := os.Getenv("CARDBOX_SHARED_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "fixtures", "cxdb", "types", name+".json"))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("shared fixtures missing: %v", err)
		}
		t.Skipf("shared fixtures missing: %v", err)
	}
	var f struct {
		PayloadHex string `json:"payload_hex"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	b, err := hex.DecodeString(f.PayloadHex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sseEvent is one server-sent event.
type sseEvent struct {
	ID, Name string
	Data     map[string]any
}

// sseStream reads server-sent events.
type sseStream struct {
	t      testing.TB
	res    *http.Response
	lines  *bufio.Scanner
	cancel context.CancelFunc
}

// events opens GET /v1/events, optionally resuming after lastID, with
// the headers given as name, value pairs.
func (h *cxdbHarness) events(lastID string, headers ...string) *sseStream {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url+"/v1/events", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cancel(); res.Body.Close() })
	return &sseStream{t: h.t, res: res, lines: bufio.NewScanner(res.Body), cancel: cancel}
}

// next reads the next event (comments skipped).
func (s *sseStream) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
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
				s.t.Fatalf("event data: %v", err)
			}
		}
	}
	s.t.Fatalf("event stream ended: %v", s.lines.Err())
	return ev
}

// until reads events until one named name arrives, and returns it.
func (s *sseStream) until(name string) sseEvent {
	s.t.Helper()
	for {
		if ev := s.next(); ev.Name == name {
			return ev
		}
	}
}
