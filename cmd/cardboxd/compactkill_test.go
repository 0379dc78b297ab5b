package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/api/adminhttp"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store/salvage"
)

// compaction asks for (post) or reads the compaction at path with the
// operator's key.
func compaction(t *testing.T, srv *serverProc, secret, method, path string) adminhttp.Compaction {
	t.Helper()
	req, _ := http.NewRequest(method, srv.httpURL(path), nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var c adminhttp.Compaction
	if err := json.NewDecoder(res.Body).Decode(&c); err != nil || res.StatusCode >= 300 {
		t.Fatalf("%s %s: %d, %v", method, path, res.StatusCode, err)
	}
	return c
}

// slowCompaction is a hosted server of 8 KiB segments that compacts
// every segment with a dead record (threshold 1) at rate bytes a second,
// with n contexts of tenant written, half of them deleted: what its
// compaction tests start from.
type slowCompaction struct {
	srv           *serverProc
	dir           string
	ctx           context.Context
	pool          *pgxpool.Pool
	secret, ops   string    // the tenant's writer key, an operator's
	live, deleted []written // the contexts' turns
	before        int64     // bytes of blobs/ and turns/ before any compaction
	unlimited     []string  // the server's environment at the default rate
}

func newSlowCompaction(t *testing.T, rate int, tenant string, n int) *slowCompaction {
	t.Helper()
	db, dir := pgtest.NewDB(t), t.TempDir()
	srv := newServer(t, dir, db)
	srv.env = append(srv.env, "CARDBOX_MODE=hosted", "CARDBOX_SEGMENT_SIZE=8192", "CARDBOX_COMPACTION_THRESHOLD=1")
	unlimited := srv.env
	srv.env = append(srv.env[:len(srv.env):len(srv.env)], fmt.Sprintf("CARDBOX_COMPACTION_RATE=%d", rate))
	srv.start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	keys := tenancy.New(pool, nil)
	secret := seed.TenantKey(t, keys, tenant, auth.RoleWriter)
	_, ops := seed.OperatorKey(t, keys)
	live, deleted := writeHalfDeleted(ctx, t, srv, pool, tenant, secret, n)
	return &slowCompaction{
		srv: srv, dir: dir, ctx: ctx, pool: pool, secret: secret, ops: ops,
		live: live, deleted: deleted, before: dataBytes(t, dir), unlimited: unlimited,
	}
}

// dataBytes is the size of the files under dataDir's blobs/ and turns/.
func dataBytes(t *testing.T, dataDir string) int64 {
	t.Helper()
	var n int64
	for _, f := range dataFiles(t, dataDir) {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// written is a context a test wrote, and the payload of each of its turns.
type written struct {
	contextID uint64
	payloads  map[uint64][]byte
}

// checkLive reads every turn of every context in live back, payload
// included, and checks that each context in deleted answers as unknown.
func checkLive(t *testing.T, srv *serverProc, secret string, live, deleted []written) {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.binAddr, client.WithClientTag("check;key="+secret))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, w := range live {
		turns, err := c.GetLast(ctx, w.contextID, uint32(len(w.payloads)+1), true)
		if err != nil || len(turns) != len(w.payloads) {
			t.Fatalf("context %d: %d turns, %v; want %d", w.contextID, len(turns), err, len(w.payloads))
		}
		for _, r := range turns {
			if !bytes.Equal(r.Payload, w.payloads[r.TurnID]) {
				t.Fatalf("context %d, turn %d: payload %q, want %q", w.contextID, r.TurnID, r.Payload, w.payloads[r.TurnID])
			}
		}
	}
	for _, w := range deleted {
		if _, err := c.GetHead(ctx, w.contextID); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("deleted context %d: GET_HEAD %v; want not found", w.contextID, err)
		}
	}
}

// TestKill9DuringCompactionLosesNoLiveTurn kills a real server with
// SIGKILL while a compaction of both files runs (slowed down by
// --compaction-rate so that the kill lands inside it), three times, each
// time after it finished at least one segment of many. After every restart each
// live turn reads byte for byte and each deleted context stays deleted;
// a last compaction then finishes, the files are smaller than before, and
// `cardbox verify` finds the store clean.
func TestKill9DuringCompactionLosesNoLiveTurn(t *testing.T) {
	// Slow enough that each kill below lands inside a compaction of
	// many segments.
	rig := newSlowCompaction(t, 16384, "bravo", 24)
	srv := rig.srv
	for round := range 3 {
		now := rig.compactASegment(t)
		if now.State != adminhttp.CompactionRunning {
			t.Fatalf("round %d: the compaction ended before the kill (%+v): --compaction-rate does not slow it down enough to test", round, now)
		}
		srv.kill()
		t.Logf("round %d: killed after %d of %d segments", round, now.SegmentsDone, now.SegmentsTotal)
		srv.start()
		checkLive(t, srv, rig.secret, rig.live, rig.deleted)
	}

	// The rest at the default rate.
	srv.kill()
	srv.env = rig.unlimited
	srv.start()
	rig.compactToTheEnd(t)
}

// compactASegment starts a compaction on the rig's running server and
// returns its progress once it compacted a segment, or ended.
func (r *slowCompaction) compactASegment(t *testing.T) adminhttp.Compaction {
	t.Helper()
	run := compaction(t, r.srv, r.ops, http.MethodPost, "/admin/compactions")
	var now adminhttp.Compaction
	waitfor.True(t, "a segment compacted", time.Minute, func() bool {
		now = compaction(t, r.srv, r.ops, http.MethodGet, "/admin/compactions/"+run.ID)
		return now.SegmentsDone >= 1 || now.State != adminhttp.CompactionRunning
	})
	return now
}

// compactToTheEnd runs a compaction on the rig's running server to its
// end, then checks that every live turn reads and deleted contexts stay
// deleted, stops the server, and checks that blobs/ and turns/ are smaller
// than before any compaction and that `cardbox verify` finds the store
// clean.
func (r *slowCompaction) compactToTheEnd(t *testing.T) {
	t.Helper()
	run := compaction(t, r.srv, r.ops, http.MethodPost, "/admin/compactions")
	var done adminhttp.Compaction
	waitfor.True(t, "the compaction to end", 2*time.Minute, func() bool {
		done = compaction(t, r.srv, r.ops, http.MethodGet, "/admin/compactions/"+run.ID)
		return done.State != adminhttp.CompactionRunning
	})
	if done.State != adminhttp.CompactionDone {
		t.Fatalf("the compaction: %+v", done)
	}
	checkLive(t, r.srv, r.secret, r.live, r.deleted)
	if err := r.srv.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, r.srv.log)
	}
	if after := dataBytes(t, r.dir); after >= r.before {
		t.Errorf("blobs/ and turns/ hold %d bytes after the compaction, %d before", after, r.before)
	}
	v, err := salvage.Verify(r.ctx, r.dir, r.pool, nil)
	if err != nil || !v.OK() {
		t.Fatalf("verify after the compaction: %+v, %v", v, err)
	}
}

// writeHalfDeleted appends 25 turns to each of n new contexts of tenant,
// whose key is secret, deletes every other context, and waits for
// the reaper to bury the deleted ones' turns: dead records then lie among
// live ones in every segment. It returns the contexts kept and deleted.
func writeHalfDeleted(ctx context.Context, t *testing.T, srv *serverProc, pool *pgxpool.Pool, tenant, secret string, n int) (live, deleted []written) {
	t.Helper()
	c, err := client.Dial(ctx, srv.binAddr, client.WithClientTag("load;key="+secret))
	if err != nil {
		t.Fatal(err)
	}
	var all []written
	for i := range n {
		h, err := c.CreateContext(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		w := written{contextID: h.ContextID, payloads: map[uint64][]byte{}}
		for j := range 25 {
			text := fmt.Sprintf("context %d turn %d %x", i, j, bytes.Repeat([]byte{byte(i), byte(j)}, 100))
			payload := append([]byte{0x81, 0x01, 0xda, byte(len(text) >> 8), byte(len(text))}, text...)
			r, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: h.ContextID, TypeID: "t", TypeVersion: 1, Payload: payload})
			if err != nil {
				t.Fatal(err)
			}
			w.payloads[r.NewTurnID] = payload
		}
		all = append(all, w)
	}
	c.Close()
	// Every other context deleted: dead records lie among live ones in
	// every segment.
	side := &tenantSide{id: tenant, secret: secret}
	for i, w := range all {
		if i%2 == 0 {
			live = append(live, w)
			continue
		}
		deleted = append(deleted, w)
		side.do(t, srv, http.MethodDelete, fmt.Sprintf("/v1/contexts/%d", w.contextID), "", http.StatusNoContent)
	}
	waitfor.Soon(t, "the reaper to bury the deleted contexts' turns", func() bool {
		var n int
		return pool.QueryRow(ctx, "SELECT count(*) FROM dead_turns").Scan(&n) == nil && n == 25*len(deleted)
	})
	return live, deleted
}
