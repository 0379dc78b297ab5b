package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/api/adminhttp"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/compact"
	"github.com/cardboxhq/cardbox/store/salvage"
	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// An operator's POST /admin/compactions compacts the turn log in the
// background: a deleted context's turns leave the files, the live ones
// still read, and verify finds the store clean. A second request while it
// runs gets the same compaction; a tenant's key gets 403.
func TestCompactionOverHTTP(t *testing.T) {
	gate, held := make(chan struct{}), make(chan struct{}, 1)
	var dir string
	d := daemontest.New(t, func(c *daemon.Config) {
		c.Mode, c.SegmentSize, dir = daemon.ModeHosted, 1<<10, c.DataDir
		c.Test.CompactionHook = func(s compact.Step) error {
			if s == compact.Written {
				select {
				case held <- struct{}{}: // the first segment's rewrite waits for the test
					<-gate
				default:
				}
			}
			return nil
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
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
	acme, err := d.Store().Tenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	dead, live := appendTurns(ctx, t, d.Store(), acme, 40), appendTurns(ctx, t, d.Store(), acme, 3)
	if err := d.CXDB().DeleteContext(ctx, acme, dead.id, "test"); err != nil {
		t.Fatal(err)
	}
	// The reaper lists the deleted context's turns as dead (the
	// sweeper's work, done here at once).
	if _, err := d.Store().ReapDeleted(ctx); err != nil {
		t.Fatal(err)
	}
	// Every closed segment sealed: compaction takes sealed ones only.
	// The reaping released the tenant's claims to the dead turns'
	// payloads, so the compaction drops them from the blob pack too.
	waitfor.True(t, "the closed segments sealed", ioTimeout, func() bool {
		for _, s := range d.Store().Stats().Segments {
			if s.State == store.SegmentClosed && s.Count > 0 {
				return false
			}
		}
		return true
	})
	before := dataFileBytes(t, dir)

	post := func(secret string) (int, adminhttp.Compaction) {
		return adminDo(ctx, t, d, secret, http.MethodPost, "/admin/compactions")
	}
	if status, _ := post(tenantSecret); status != http.StatusForbidden {
		t.Fatalf("a tenant admin's POST /admin/compactions: %d, want 403", status)
	}
	status, first := post(opSecret)
	if status != http.StatusAccepted || first.State != adminhttp.CompactionRunning {
		t.Fatalf("POST /admin/compactions: %d %+v, want 202 and running", status, first)
	}
	select { // the compaction is in its first segment's rewrite
	case <-held:
	case <-ctx.Done():
		_, now := adminDo(context.Background(), t, d, opSecret, http.MethodGet, "/admin/compactions/"+first.ID)
		close(gate)
		t.Fatalf("no segment rewrite began: %+v, %+v", now, d.Store().Stats().Segments)
	}
	if status, again := post(opSecret); status != http.StatusAccepted || again.ID != first.ID {
		t.Errorf("POST while one runs: %d, id %q; want 202 and the running one, %q", status, again.ID, first.ID)
	}
	close(gate)

	var done adminhttp.Compaction
	waitfor.True(t, "the compaction done", ioTimeout, func() bool {
		_, done = adminDo(ctx, t, d, opSecret, http.MethodGet, "/admin/compactions/"+first.ID)
		return done.State != adminhttp.CompactionRunning
	})
	if done.State != adminhttp.CompactionDone || done.BytesReclaimed <= 0 || done.SegmentsTotal == 0 || done.SegmentsDone != done.SegmentsTotal {
		t.Fatalf("compaction: %+v; want done, with bytes reclaimed over every segment", done)
	}
	if _, latest := adminDo(ctx, t, d, opSecret, http.MethodGet, "/admin/compactions/latest"); latest.ID != first.ID {
		t.Errorf("latest: %q, want %q", latest.ID, first.ID)
	}
	if after := dataFileBytes(t, dir); after >= before || before-after != done.BytesReclaimed {
		t.Errorf("the turn log's and the blob pack's files hold %d bytes, %d before; the compaction says it reclaimed %d", after, before, done.BytesReclaimed)
	}
	for _, id := range live.turns {
		if _, err := d.Store().TurnPayload(ctx, acme, id); err != nil {
			t.Errorf("live turn %d: %v", id, err)
		}
	}
	report, err := salvage.Verify(ctx, dir, d.Pool(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// The dead records left are in the active segment, which no
	// compaction rewrites.
	if len(report.PackDefects)+len(report.LogDefects)+len(report.Problems) != 0 || report.DeadRecords >= len(dead.turns) {
		t.Errorf("verify after the compaction: %+v; want clean, with fewer than %d dead records", report, len(dead.turns))
	}
	m := scrapeAs(t, d, opSecret, "cardbox_compaction_")
	if m["cardbox_compaction_runs_total"] != 1 || m["cardbox_compaction_errors_total"] != 0 ||
		m["cardbox_compaction_reclaimed_bytes_total"] != float64(done.BytesReclaimed) {
		t.Errorf("/metrics: %v; want 1 run, no error, %d bytes reclaimed", m, done.BytesReclaimed)
	}
}

// appended is a context and its turns.
type appended struct {
	id    uint64
	turns []uint64
}

// appendTurns appends n turns of 300 random bytes each to a new context.
func appendTurns(ctx context.Context, t *testing.T, e *store.Engine, tenant ident.Tenant, n int) appended {
	t.Helper()
	head, err := e.CreateContext(ctx, tenant, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	out := appended{id: head.ContextID}
	for range n {
		p := make([]byte, 300)
		rand.Read(p)
		r, err := e.Append(ctx, tenant, &store.AppendRequest{
			ContextID: head.ContextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
			UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
		})
		if err != nil {
			t.Fatal(err)
		}
		out.turns = append(out.turns, r.TurnID)
	}
	return out
}

// dataFileBytes is the size of the turn log's and the blob pack's
// segment files, what a compaction rewrites.
func dataFileBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, l := range []segment.Layout{turnlog.Layout(store.TurnLogPath(dir)), blobpack.Layout(store.BlobDir(dir))} {
		ids, err := l.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			fi, err := os.Stat(l.Path(id))
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
	}
	return n
}

// adminDo sends an administration request with the key and decodes the
// compaction it answers (zero for an error).
func adminDo(ctx context.Context, t *testing.T, d *daemon.Daemon, secret, method, path string) (int, adminhttp.Compaction) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://%s%s", d.HTTPAddr(), path), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var c adminhttp.Compaction
	if res.StatusCode < 300 {
		if err := json.NewDecoder(res.Body).Decode(&c); err != nil {
			t.Fatal(err)
		}
	}
	return res.StatusCode, c
}
