package daemon_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const ioTimeout = 10 * time.Second

// A turn appended on the binary port reaches everything subscribed to
// the store's commits: the CXDB service's event stream and the analytics
// projector.
func TestCommitsReachTheSubscribers(t *testing.T) {
	d := daemontest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.HTTPAddr()+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := bufio.NewScanner(res.Body)
	if name := nextEvent(events); name != "connected" {
		t.Fatalf("first event %q, want connected", name)
	}

	c, err := client.Dial(ctx, d.BinaryAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte{0x81, 0xa1, 'x', 0x01} // msgpack {"x": 1}
	if _, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: head.ContextID, TypeID: "test.Note", TypeVersion: 1, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	for name := nextEvent(events); name != "turn_appended"; name = nextEvent(events) {
		if name == "" {
			t.Fatalf("the event stream ended before turn_appended: %v", events.Err())
		}
	}
	waitfor.True(t, "the projector's row of the turn", ioTimeout, func() bool {
		var n int
		err := d.Pool().QueryRow(ctx, "SELECT count(*) FROM turn_data").Scan(&n)
		return err == nil && n == 1
	})
}

// nextEvent returns the name of the next server-sent event; "" when the
// stream ends.
func nextEvent(s *bufio.Scanner) string {
	for s.Scan() {
		if name, ok := strings.CutPrefix(s.Text(), "event: "); ok {
			return name
		}
	}
	return ""
}

// A second daemon on a data directory in use fails before it touches
// anything; once the first has shut down, the directory is free again.
func TestShutdownFreesTheDataDirectory(t *testing.T) {
	cfg := daemontest.Config(t)
	cfg.Pool = pgtest.NewPool(t)
	first, err := daemon.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	first.Start()
	if _, err := daemon.New(context.Background(), cfg); !errors.Is(err, datadir.ErrLocked) {
		t.Fatalf("a second daemon on the same data directory: %v, want %v", err, datadir.ErrLocked)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	if err := first.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := first.Shutdown(ctx); err != nil {
		t.Fatalf("a second shutdown: %v", err)
	}
	daemontest.Start(t, cfg)
}

// Hosted mode checks keys on both surfaces; dev mode has none.
func TestModes(t *testing.T) {
	dev := daemontest.New(t, nil)
	if dev.Keys() != nil || dev.Quota() != nil {
		t.Error("dev mode has keys or quotas")
	}
	hosted := daemontest.New(t, func(c *daemon.Config) { c.Mode = daemon.ModeHosted })
	if hosted.Keys() == nil || hosted.Quota() == nil {
		t.Fatal("hosted mode has no keys or quotas")
	}
	res, err := http.Get("http://" + hosted.HTTPAddr() + "/v1/contexts")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("hosted mode without a key: %d, want 401", res.StatusCode)
	}
}

// A configuration that cannot serve fails New, which leaves nothing
// behind: the data directory is free for the next daemon.
func TestNewRefusesAndReleases(t *testing.T) {
	cfg := daemontest.Config(t)
	cfg.Pool = pgtest.NewPool(t)
	bad := cfg
	bad.HTTPAddr = "0.0.0.0:0" // dev mode beyond loopback
	if _, err := daemon.New(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("dev mode on 0.0.0.0: %v, want a refusal naming loopback", err)
	}
	bad = cfg
	bad.OperatorKeyFile = "operator_key" // dev mode has no keys: fails after the lock and listeners
	if _, err := daemon.New(context.Background(), bad); err == nil {
		t.Fatal("an operator key file in dev mode: no error")
	}
	daemontest.Start(t, cfg)
}
