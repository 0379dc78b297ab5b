package store_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/salvage"
)

// claimsPack is a store with small segments on a test clock.
type claimsPack struct {
	t    *testing.T
	pool *pgxpool.Pool
	opts store.Options
	e    *store.Engine
}

func (c *claimsPack) open() {
	c.t.Helper()
	e, err := store.Open(context.Background(), c.opts)
	if err != nil {
		c.t.Fatalf("open the store: %v", err)
	}
	c.e = e
	c.t.Cleanup(func() { e.Close() })
}

func (c *claimsPack) reopen() {
	c.t.Helper()
	if err := c.e.Close(); err != nil {
		c.t.Fatalf("close: %v", err)
	}
	c.open()
}

func (c *claimsPack) tenant(id string) ident.Tenant {
	c.t.Helper()
	if _, err := c.pool.Exec(context.Background(), `INSERT INTO tenants (tenant_id) VALUES ($1)`, id); err != nil {
		c.t.Fatal(err)
	}
	t, err := c.e.Tenant(context.Background(), id)
	if err != nil {
		c.t.Fatal(err)
	}
	return t
}

func (c *claimsPack) context(t ident.Tenant) uint64 {
	c.t.Helper()
	h, err := c.e.CreateContext(context.Background(), t, 0, "")
	if err != nil {
		c.t.Fatal(err)
	}
	return h.ContextID
}

func (c *claimsPack) append(t ident.Tenant, ctxID uint64, p []byte) {
	c.t.Helper()
	_, err := c.e.Append(context.Background(), t, &store.AppendRequest{
		ContextID: ctxID, TypeID: "t", TypeVersion: 1, Encoding: 1,
		UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
	})
	if err != nil {
		c.t.Fatalf("append: %v", err)
	}
}

func (c *claimsPack) rows(table string) int {
	c.t.Helper()
	var n int
	if err := c.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// reads checks that t reads the blob h, data, or finds it not stored.
func (c *claimsPack) reads(t ident.Tenant, h ident.Hash, data []byte, want bool) {
	c.t.Helper()
	got, err := c.e.GetBlob(context.Background(), t, h)
	switch {
	case want && (err != nil || !bytes.Equal(got, data)):
		c.t.Errorf("tenant %s reads %d bytes of blob %x, %v; want them", t.ID, len(got), h[:4], err)
	case !want && fault.KindOf(err) != fault.NotFound:
		c.t.Errorf("tenant %s: blob %x: %v, want not found", t.ID, h[:4], err)
	}
}

// A compaction of the blob pack drops a blob whose first writer released
// its claim when no tenant holds a grant to it, and forgets the released
// claim with it: the tenant storing the bytes again is their first
// writer anew, reads them and is charged for them, across a restart too.
// A blob another tenant holds a grant to stays.
func TestPackCompactionDropsReleasedBlobs(t *testing.T) {
	clock := testkit.NewClock(time.Now())
	c := &claimsPack{t: t, pool: pgtest.NewPool(t)}
	c.opts = store.Options{Dir: t.TempDir(), Pool: c.pool, SegmentSize: 4 << 10, FileReserve: -1, Now: clock.Now}
	c.open()
	ctx := context.Background()
	acme, bravo, filler := c.tenant("acme"), c.tenant("bravo"), c.tenant("filler")

	dropped := noise(1, 600)
	dh := blake3.Sum256(dropped)
	shared := noise(2, 600)
	sh := blake3.Sum256(shared)
	ca := c.context(acme)
	c.append(acme, ca, dropped)
	c.append(acme, ca, shared)
	c.append(bravo, c.context(bravo), shared) // bravo's grant
	for i := range 20 {                       // the first segment fills up and closes
		data := noise(uint64(100+i), 300)
		if _, err := c.e.PutBlob(ctx, filler, blake3.Sum256(data), data); err != nil {
			t.Fatal(err)
		}
	}
	// A group that appends a turn moves the pack's committed end past
	// the closed segments, which are then sealed.
	c.append(filler, c.context(filler), noise(200, 100))
	waitfor.True(t, "the first segment of the blob pack sealed", 30*time.Second, func() bool {
		for _, s := range c.e.Stats().Segments {
			if s.File == store.FileBlobs && s.State == store.SegmentSealed {
				return s.Count > 0
			}
		}
		return false
	})
	bravoBefore := c.e.Usage(bravo)

	clock.Add(store.DefaultBlobClaimGrace + time.Minute)
	if err := c.e.DeleteContext(ctx, acme, ca, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.e.ReapDeleted(ctx); err != nil {
		t.Fatal(err)
	}
	c.reads(acme, dh, dropped, false)
	if n := c.rows("released_blob_claims"); n != 2 {
		t.Fatalf("released_blob_claims has %d rows, want acme's two first writes", n)
	}

	res, err := c.e.CompactPackSegment(ctx, 0)
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	if res.Dropped != 1 || res.After >= res.Before {
		t.Fatalf("compaction: %+v; want the one unclaimed blob dropped and the segment smaller", res)
	}
	if n := c.rows("released_blob_claims"); n != 1 {
		t.Errorf("released_blob_claims has %d rows, want the claim to the blob bravo keeps", n)
	}
	check := func(acmeReads bool, acmeUsage int64) {
		t.Helper()
		c.reads(acme, dh, dropped, acmeReads)
		c.reads(acme, sh, shared, false)
		c.reads(bravo, sh, shared, true)
		c.reads(bravo, dh, dropped, false)
		if u := c.e.Usage(acme); u != acmeUsage {
			t.Errorf("acme stores %d bytes, want %d", u, acmeUsage)
		}
		if u := c.e.Usage(bravo); u != bravoBefore {
			t.Errorf("bravo stores %d bytes, was %d", u, bravoBefore)
		}
	}
	check(false, 0)
	c.reopen()
	check(false, 0)

	// Stored again, the bytes are acme's as a first writer's.
	if isNew, err := c.e.PutBlob(ctx, acme, dh, dropped); err != nil || !isNew {
		t.Fatalf("put again: new %v, %v; want a new blob", isNew, err)
	}
	check(true, int64(len(dropped)))
	c.reopen()
	check(true, int64(len(dropped)))

	if err := c.e.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := salvage.Verify(ctx, c.opts.Dir, c.pool, nil)
	if err != nil || !v.OK() {
		t.Errorf("verify: %+v, %v", v, err)
	}
	c.open()
}
