package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/internal/testbin"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/salvage"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// marker is a string no two runs share, planted in what a deletion must
// erase.
func marker(t *testing.T, what string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return what + "-" + hex.EncodeToString(b)
}

// planted is what one writer stored with a marker in it: a context of
// turns whose payloads carry it, and a turn with an fs snapshot whose
// file name and content carry it.
type planted struct {
	marker    string
	contextID uint64
	turns     []uint64
	uploads   []client.Hash // the fs snapshot's file and tree
}

// plant writes a context of turns carrying m (payloads long enough to be
// stored compressed, and short ones stored raw) and attaches an fs tree
// whose file name and content carry it, with side's key.
func plant(t *testing.T, srv *serverProc, side *tenantSide, m string) planted {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.binAddr, client.WithClientTag("plant;key="+side.secret))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := planted{marker: m, contextID: h.ContextID}
	for i := range 30 {
		text := fmt.Sprintf("%s turn %d", m, i)
		if i%2 == 0 { // compressible: stored as a zstd frame
			text += strings.Repeat(" "+m, 40)
		}
		payload := append([]byte{0x81, 0x01, 0xda, byte(len(text) >> 8), byte(len(text))}, text...)
		r, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: h.ContextID, TypeID: "t", TypeVersion: 1, Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		p.turns = append(p.turns, r.NewTurnID)
	}
	file := []byte(m + " in a file of the workspace")
	fileHash, _, err := c.PutBlob(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	root, _, err := c.PutBlob(ctx, fstree.Encode([]fstree.Entry{
		{Name: m + ".txt", Kind: fstree.KindFile, Mode: 0o644, Size: uint64(len(file)), Hash: fileHash, HashOK: true},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AttachFS(ctx, p.turns[len(p.turns)-1], root); err != nil {
		t.Fatal(err)
	}
	p.uploads = []client.Hash{fileHash, root}
	return p
}

// released waits until side reads none of hashes: the reaper released
// its claims to them (the deleted context's uploads, once the grace has
// passed).
func released(t *testing.T, srv *serverProc, side *tenantSide, hashes []client.Hash) {
	t.Helper()
	c, err := client.Dial(context.Background(), srv.binAddr, client.WithClientTag("check;key="+side.secret))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The reaper looks again when the grace ends, and a release that
	// met the tenant's writes is tried again 10 s later.
	waitfor.True(t, "the deleted context's uploads released", time.Minute, func() bool {
		for _, h := range hashes {
			_, err := c.GetBlob(context.Background(), h)
			if err == nil {
				return false
			}
			if !errors.Is(err, client.ErrNotFound) {
				t.Fatalf("GET_BLOB %x: %v; want it read or not found", h[:6], err)
			}
		}
		return true
	})
}

// compactNow runs `cardbox compact --wait` against srv with the operator's
// key and checks that it says the compaction is done.
func compactNow(t *testing.T, srv *serverProc, opsSecret string) {
	t.Helper()
	cmd := exec.Command(testbin.Command(t, "./cmd/cardbox"), "compact", "--wait", "--http-addr", srv.httpAddr)
	cmd.Env = append(os.Environ(), "CARDBOX_KEY="+opsSecret)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cardbox compact --wait: %v\n%s\nserver:\n%s", err, out, srv.log)
	}
	t.Logf("cardbox compact --wait:\n%s", out)
}

// fileHits names the records under dataDir's blobs/ and turns/ that still
// hold any of markers, or name any of the tenants or contexts: every pack
// record's blob uncompressed, every turn record, and every file's raw
// bytes.
func fileHits(t *testing.T, dataDir string, markers []string, tenants []int32, contexts []uint64) []string {
	t.Helper()
	var hits []string
	find := func(where string, b []byte) {
		for _, m := range markers {
			if bytes.Contains(b, []byte(m)) {
				hits = append(hits, fmt.Sprintf("%s holds %q", where, m))
			}
		}
	}
	defects, err := blobpack.VerifyContent(store.BlobDir(dataDir), func(e blobpack.Entry, blob []byte) {
		find(fmt.Sprintf("the pack record at %d (blob %x)", e.Offset, e.Hash[:6]), blob)
	}, nil)
	if err != nil || len(defects) != 0 {
		t.Fatalf("read the pack: %v, defects %v", err, defects)
	}
	named := map[int64]bool{}
	for _, n := range tenants {
		named[int64(n)] = true
	}
	for _, id := range contexts {
		named[-int64(id)] = true
	}
	_, logDefects, err := turnlog.Scan(store.TurnLogPath(dataDir), func(off int64, r turnlog.Record) {
		if named[int64(r.Tenant)] || named[-int64(r.ContextID)] {
			hits = append(hits, fmt.Sprintf("the turn record at %d (tenant %d, context %d, turn %d)", off, r.Tenant, r.ContextID, r.TurnID))
		}
	})
	if err != nil || len(logDefects) != 0 {
		t.Fatalf("read the turn log: %v, defects %v", err, logDefects)
	}
	for _, f := range dataFiles(t, dataDir) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		find(f, b)
	}
	return hits
}

// dataFiles lists the files under dataDir's blobs/ and turns/.
func dataFiles(t *testing.T, dataDir string) []string {
	t.Helper()
	var files []string
	for _, sub := range []string{"blobs", "turns"} {
		fs, err := filepath.Glob(filepath.Join(dataDir, sub, "*"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	return files
}

// rowHits names the tables with a row whose text holds any of markers, as
// text or as the hex of bytes.
func rowHits(t *testing.T, pool *pgxpool.Pool, markers []string) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables
		WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var hits []string
	for _, table := range tables {
		for _, m := range markers {
			var n int
			q := "SELECT count(*) FROM " + table + " x WHERE strpos(x::text, $1) > 0 OR strpos(x::text, $2) > 0"
			if err := pool.QueryRow(ctx, q, m, hex.EncodeToString([]byte(m))).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				hits = append(hits, fmt.Sprintf("%d rows of %s hold %q", n, table, m))
			}
		}
	}
	return hits
}

// TestDeletedBytesAreErased plants a unique string in a tenant's turns, fs
// files and cards and another in one context of a second tenant; deletes
// the first tenant and the second tenant's context; and runs `cardbox
// compact --wait`. Then no record under blobs/ and turns/ holds either
// string or is a deleted turn's, and no row SQL returns holds them, while
// the second tenant still reads the bytes both tenants stored and its
// live context.
func TestDeletedBytesAreErased(t *testing.T) {
	db, dir := pgtest.NewDB(t), t.TempDir()
	srv := newServer(t, dir, db)
	// Small segments, so that the deleted records lie in sealed segments
	// among live ones, and in the active one.
	// A short grace for uploads: a deleted context's uploaded blobs lose
	// its tenant's claim once the grace has passed since their upload.
	srv.env = append(srv.env, "CARDBOX_MODE=hosted", "CARDBOX_SEGMENT_SIZE=16384", "CARDBOX_BLOB_CLAIM_GRACE=1s")
	srv.start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	keys := tenancy.New(pool, nil)
	acme := &tenantSide{id: "acme", secret: seed.TenantKey(t, keys, "acme", auth.RoleWriter)}
	bravo := &tenantSide{id: "bravo", secret: seed.TenantKey(t, keys, "bravo", auth.RoleWriter)}
	_, opsSecret := seed.OperatorKey(t, keys)

	bravoLive := plant(t, srv, bravo, marker(t, "bravo-live"))
	acmeData := plant(t, srv, acme, marker(t, "acme"))
	acme.do(t, srv, http.MethodPost, "/projects/acme/cards",
		fmt.Sprintf(`{"card_id":"c1","content":%q,"metadata":{"type":"agent.thought"}}`, acmeData.marker), http.StatusCreated)
	bravoGone := plant(t, srv, bravo, marker(t, "bravo-gone"))
	// Bytes both store, acme first: bravo reads them after acme is gone.
	shared := []byte(marker(t, "shared") + " stored by both tenants")
	for _, side := range []*tenantSide{acme, bravo} {
		c, err := client.Dial(ctx, srv.binAddr, client.WithClientTag("put;key="+side.secret))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.PutBlob(ctx, shared); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	more := plant(t, srv, bravo, marker(t, "bravo-after")) // live records after the deleted ones
	var acmeNo int32
	if err := pool.QueryRow(ctx, "SELECT tenant_no FROM tenants WHERE tenant_id = 'acme'").Scan(&acmeNo); err != nil {
		t.Fatal(err)
	}

	bravo.do(t, srv, http.MethodDelete, fmt.Sprintf("/v1/contexts/%d", bravoGone.contextID), "", http.StatusNoContent)
	if _, err := keys.DeleteTenant(ctx, "test", "acme"); err != nil {
		t.Fatal(err)
	}
	waitfor.Soon(t, "acme's rows to go", func() bool {
		for _, n := range tenantRows(t, pool, "acme") {
			if n != 0 {
				return false
			}
		}
		return true
	})
	released(t, srv, bravo, bravoGone.uploads)
	compactNow(t, srv, opsSecret)

	gone := []string{acmeData.marker, bravoGone.marker}
	if hits := rowHits(t, pool, gone); len(hits) != 0 {
		t.Errorf("rows still hold deleted data:\n%s", strings.Join(hits, "\n"))
	}
	// The live data is read as before, the shared bytes included.
	c, err := client.Dial(ctx, srv.binAddr, client.WithClientTag("check;key="+bravo.secret))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []planted{bravoLive, more} {
		turns, err := c.GetLast(ctx, p.contextID, 100, true)
		n := 0
		for _, r := range turns {
			if bytes.Contains(r.Payload, []byte(p.marker+" turn ")) {
				n++
			}
		}
		if err != nil || n != len(p.turns) {
			t.Errorf("bravo's context %d reads %d of its %d turns after the compaction: %v", p.contextID, n, len(p.turns), err)
		}
	}
	if got, err := c.GetBlob(ctx, hashOf(shared)); err != nil || !bytes.Equal(got, shared) {
		t.Errorf("bravo's copy of the bytes acme stored first: %q, %v", got, err)
	}
	c.Close()

	if err := srv.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, srv.log)
	}
	if hits := fileHits(t, dir, gone, []int32{acmeNo}, []uint64{bravoGone.contextID}); len(hits) != 0 {
		t.Errorf("the files still hold deleted data:\n%s", strings.Join(hits, "\n"))
	}
	if kept := fileHits(t, dir, []string{bravoLive.marker, more.marker, string(shared)}, nil, nil); len(kept) < 3 {
		t.Errorf("the live data is not in the files as the check reads them: %v", kept)
	}
	r, err := salvage.Verify(ctx, dir, pool, nil)
	if err != nil || !r.OK() {
		t.Fatalf("verify after the erasure: %+v, %v", r, err)
	}
}
