package server_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/internal/logtest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
)

// levelLog is a slog.Handler that keeps every record as its level, message
// and attributes.
type levelLog struct {
	mu   sync.Mutex
	recs []string
}

func (l *levelLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *levelLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *levelLog) WithGroup(string) slog.Handler            { return l }

func (l *levelLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, b.String())
	return nil
}

// with returns the records that start with prefix (level and message).
func (l *levelLog) with(prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		if strings.HasPrefix(r, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// counterSum sums the samples of counter family name whose labels
// include want.
func counterSum(t *testing.T, srv *server.Server, name string, want map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(srv.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for k, v := range want {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == k && l.GetValue() == v)
				}
				if !found {
					continue metrics
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestClientThatGoesAwayIsNotAnError: a request in flight when its client
// closes or resets the connection is abandoned: logged at debug, counted
// in cardbox_binary_client_closed_total and not as an answered request
// (no 5xx), never logged at ERROR (the env's cleanup fails on any). A
// session the server closes itself still counts its cancelled request as
// the 503 it is.
func TestClientThatGoesAwayIsNotAnError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		end  func(e *env, c *rawConn)
		// clientLeft: the client ended the session, else the server did.
		clientLeft bool
	}{
		{"client closes", func(_ *env, c *rawConn) { c.close() }, true},
		{"client resets", func(_ *env, c *rawConn) {
			if err := c.conn.(*net.TCPConn).SetLinger(0); err != nil { // close sends RST
				c.t.Fatal(err)
			}
			c.close()
		}, true},
		{"server closes the session", func(e *env, _ *rawConn) {
			if n := e.srv.CloseSessions(func(server.Identity) bool { return true }); n != 1 {
				e.t.Fatalf("closed %d sessions, want 1", n)
			}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := &levelLog{}
			var g *gate
			e := newEnvWith(t, envConfig{
				wrap: func(en *store.Engine) store.TurnStore { g = newGate(en); return g },
				options: func(o *server.Options) {
					o.Logger = slog.New(logtest.Tee{o.Logger.Handler(), logs})
				},
			})
			t.Cleanup(g.release)
			c := dialRaw(t, e.addr)
			h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
			c.send(cxdbcompat.MsgAppendTurn, 0, 1, appendReq(h.ContextID, 0, []byte("held")).AppendTo(nil))
			g.waitEntered(t, 1)
			tc.end(e, c)

			appends := map[string]string{"type": "APPEND_TURN"}
			closed := func() float64 { return counterSum(t, e.srv, "cardbox_binary_client_closed_total", nil) }
			answered := func() float64 { return counterSum(t, e.srv, "cardbox_binary_requests_total", appends) }
			waitfor.True(t, "the held append to end", 10*time.Second, func() bool { return closed()+answered() > 0 })
			abandonedLogs := logs.with("DEBUG binary request abandoned: the client closed the connection")
			if tc.clientLeft {
				if n := closed(); n != 1 {
					t.Errorf("cardbox_binary_client_closed_total = %v, want 1", n)
				}
				if n := answered(); n != 0 {
					t.Errorf("the abandoned append was counted as answered %v times", n)
				}
				if len(abandonedLogs) != 1 || !strings.Contains(abandonedLogs[0], "type=APPEND_TURN") {
					t.Errorf("debug records of the abandoned append: %q", abandonedLogs)
				}
			} else {
				if n := closed(); n != 0 {
					t.Errorf("a session the server closed counted %v client-closed requests", n)
				}
				if n := counterSum(t, e.srv, "cardbox_binary_requests_total", map[string]string{"type": "APPEND_TURN", "code": "503"}); n != 1 {
					t.Errorf("cancelled append counted as 503 %v times, want 1", n)
				}
				if len(abandonedLogs) != 0 {
					t.Errorf("a session the server closed logged as client-closed: %q", abandonedLogs)
				}
			}
			if errs := logs.with("ERROR"); len(errs) != 0 {
				t.Errorf("logged at ERROR: %q", errs)
			}
			e.requireServing()
		})
	}
}
