package main

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/compact"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// `cardbox compact` against a real server: a tenant's key is refused
// (403); an operator's --wait shows the progress and ends once every
// deleted byte is gone, the active segment's too; without --wait it
// answers at once; a compaction that fails makes --wait fail with its
// error.
func TestCompactCommand(t *testing.T) {
	var fail atomic.Bool
	var dir string
	d := daemontest.New(t, func(c *daemon.Config) {
		c.Mode, c.SegmentSize, dir = daemon.ModeHosted, 8*turnlog.RecordSize, c.DataDir
		c.Test.CompactionHook = func(s compact.Step) error {
			if s == compact.Written && fail.Load() {
				return errors.New("the test's disk is gone")
			}
			return nil
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := d.Tenancy()
	if _, err := adm.CreateTenant(ctx, "test", "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	_, tenantSecret, err := adm.CreateKey(ctx, "test", "acme", auth.RoleAdmin, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, opSecret, err := adm.CreateOperatorKey(ctx, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	e := d.Store()
	acme, err := e.Tenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	// fill appends rounds of a live turn and a doomed one, then deletes
	// the doomed context: its records are in every segment, the active
	// one too. The two turns of a round carry the same payload, which
	// the live one keeps: only the turn log holds dead bytes.
	fill := func(rounds int) {
		t.Helper()
		live, doomed := newContext(ctx, t, e, acme), newContext(ctx, t, e, acme)
		for range rounds {
			p := make([]byte, 100)
			rand.Read(p)
			appendTurn(ctx, t, e, acme, live, p)
			appendTurn(ctx, t, e, acme, doomed, p)
		}
		if err := d.CXDB().DeleteContext(ctx, acme, doomed, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.ReapDeleted(ctx); err != nil {
			t.Fatal(err)
		}
	}
	addr := d.HTTPAddr()

	if _, err := cardbox(ctx, "compact", "--http-addr", addr, "--key", tenantSecret); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("cardbox compact with a tenant's key: %v, want a 403", err)
	}

	fill(19) // 38 records: 4 segments of 8 and 6 in the active one
	out, err := cardbox(ctx, "compact", "--wait", "--poll", "10ms", "--http-addr", addr, "--key", opSecret)
	if err != nil {
		t.Fatalf("cardbox compact --wait: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || lines[0] != "compaction 1 running" ||
		lines[len(lines)-1] != "compaction 1 done: 5 segments, 2432 bytes reclaimed" { // 19 records of 128 bytes
		t.Errorf("cardbox compact --wait printed:\n%s", out)
	}
	for _, s := range e.DeadTurnSegments() {
		t.Errorf("after cardbox compact --wait: %+v holds dead bytes", s)
	}
	var left int
	if _, defects, err := turnlog.Scan(store.TurnLogPath(dir), func(int64, turnlog.Record) { left++ }); err != nil || len(defects) > 0 || left != 19 {
		t.Errorf("the turn log holds %d records (%v, %v); want the 19 live ones", left, defects, err)
	}

	fill(3)
	out, err = cardbox(ctx, "compact", "--http-addr", addr, "--key", opSecret)
	if err != nil || !strings.HasPrefix(out, "compaction 2 ") {
		t.Errorf("cardbox compact: %q, %v; want compaction 2", out, err)
	}
	// --wait on the compaction running follows it to its end.
	if out, err := cardbox(ctx, "compact", "--wait", "--poll", "10ms", "--http-addr", addr, "--key", opSecret); err != nil ||
		!strings.Contains(out, "done") {
		t.Errorf("cardbox compact --wait: %q, %v", out, err)
	}

	fill(3)
	fail.Store(true)
	out, err = cardbox(ctx, "compact", "--wait", "--poll", "10ms", "--http-addr", addr, "--key", opSecret)
	if err == nil || !strings.Contains(err.Error(), "failed") || !strings.Contains(err.Error(), "the test's disk is gone") {
		t.Errorf("cardbox compact --wait of a failing compaction: %v\n%s; want its error", err, out)
	}
	// The exit status a shell sees.
	if _, stderr, code := runCLI(t, "compact", "--wait", "--poll", "10ms", "--http-addr", addr, "--key", opSecret); code != 1 ||
		!strings.Contains(stderr, "the test's disk is gone") {
		t.Errorf("cardbox compact --wait of a failing compaction: exit %d, stderr %q; want 1 and its error", code, stderr)
	}
}

func newContext(ctx context.Context, t *testing.T, e *store.Engine, tenant ident.Tenant) uint64 {
	t.Helper()
	h, err := e.CreateContext(ctx, tenant, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	return h.ContextID
}

func appendTurn(ctx context.Context, t *testing.T, e *store.Engine, tenant ident.Tenant, contextID uint64, p []byte) {
	t.Helper()
	if _, err := e.Append(ctx, tenant, &store.AppendRequest{
		ContextID: contextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
		UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
	}); err != nil {
		t.Fatal(err)
	}
}
