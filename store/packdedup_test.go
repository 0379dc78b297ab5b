package store_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/compact"
	"github.com/cardboxhq/cardbox/store/salvage"
)

// dedupRace is a store whose first sealed blob-pack segment holds the
// blobs of a deleted tenant, which no one claims, and a live tenant
// whose put or append of one of them can be held after its lookup found
// the blob stored, before its claim commits.
type dedupRace struct {
	t    *testing.T
	dir  string
	pool *pgxpool.Pool
	opts store.Options
	e    *store.Engine
	keep ident.Tenant
	ctx  uint64 // a context of keep

	dead map[ident.Hash][]byte // the deleted tenant's blobs in the first segment

	// hold, while armed, stops the next put that found its blob stored,
	// or the next group's COMMIT, once: it says so on held and waits for
	// release.
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
	// waits hears each time a compaction waits for deduplications in
	// flight.
	waits chan struct{}
}

func (r *dedupRace) hold() {
	if r.armed.CompareAndSwap(true, false) {
		r.held <- struct{}{}
		<-r.release
	}
}

func newDedupRace(t *testing.T) *dedupRace {
	t.Helper()
	r := &dedupRace{t: t, dir: t.TempDir(), pool: pgtest.NewPool(t), dead: map[ident.Hash][]byte{},
		held: make(chan struct{}, 1), release: make(chan struct{}), waits: make(chan struct{}, 16)}
	ctx := context.Background()
	for _, id := range []string{"keeper", "leaver"} {
		if _, err := r.pool.Exec(ctx, `INSERT INTO tenants (tenant_id) VALUES ($1)`, id); err != nil {
			t.Fatal(err)
		}
	}
	r.opts = store.Options{Dir: r.dir, Pool: r.pool, SegmentSize: 4 << 10, FileReserve: -1}
	store.SetDedupHooks(&r.opts, func(ident.Hash) { r.hold() }, r.hold, func() {
		select {
		case r.waits <- struct{}{}:
		default:
		}
	})
	r.open()
	var err error
	if r.keep, err = r.e.Tenant(ctx, "keeper"); err != nil {
		t.Fatal(err)
	}
	leave, err := r.e.Tenant(ctx, "leaver")
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.e.CreateContext(ctx, r.keep, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	r.ctx = c.ContextID
	stored := map[ident.Hash][]byte{}
	for i := range 40 { // about three segments
		data := noise(uint64(i), 300)
		h := blake3.Sum256(data)
		if _, err := r.e.PutBlob(ctx, leave, h, data); err != nil {
			t.Fatal(err)
		}
		stored[h] = data
	}
	// A group that appends a turn moves the pack's committed end past
	// the closed segments, which are then sealed.
	if _, err := r.append(noise(1000, 100)); err != nil {
		t.Fatal(err)
	}
	pgtest.MarkTenantDeleted(t, r.pool, "leaver")
	pgtest.PurgeDeletedTenant(t, r.pool, "leaver")
	if _, err := r.e.ForgetTenant(ctx, "leaver"); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "the first segment of the blob pack sealed", 30*time.Second, func() bool {
		for _, s := range r.e.Stats().Segments {
			if s.File == store.FileBlobs && s.State == store.SegmentSealed {
				return s.Count > 0
			}
		}
		return false
	})
	if _, _, err := blobpack.SegmentRecords(ctx, filepath.Join(store.BlobDir(r.dir), blobpack.PackFile), 0,
		func(_ []byte, en blobpack.Entry) error {
			r.dead[en.Hash] = stored[en.Hash]
			return nil
		}); err != nil {
		t.Fatal(err)
	}
	if len(r.dead) < 3 {
		t.Fatalf("%d blobs in the first segment", len(r.dead))
	}
	return r
}

func (r *dedupRace) open() {
	r.t.Helper()
	e, err := store.Open(context.Background(), r.opts)
	if err != nil {
		r.t.Fatalf("open the store: %v", err)
	}
	r.e = e
	r.t.Cleanup(func() { e.Close() })
}

// append appends a turn of keep with payload p.
func (r *dedupRace) append(p []byte) (uint64, error) {
	res, err := r.e.Append(context.Background(), r.keep, &store.AppendRequest{
		ContextID: r.ctx, TypeID: "t", TypeVersion: 1, Encoding: 1,
		UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
	})
	return res.TurnID, err
}

// noise returns n bytes that do not compress, different for each seed.
func noise(seed uint64, n int) []byte {
	rnd := rand.New(rand.NewPCG(seed, seed^0xfe11ce))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rnd.Uint32())
	}
	return b
}

// A put or an append that found a blob of a sealed segment stored before
// a compaction of the segment began, and whose claim to it commits only
// after the compaction would have decided the blob is dead: the
// compaction waits for the claim before it asks Postgres, keeps the blob
// and drops the other dead ones; the blob reads after the compaction and
// after a restart, and cardbox verify finds the store clean.
func TestPackCompactionWaitsForDedupsInFlight(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// store stores data, whose hash is h, as keep, and returns the
		// turn it appended, if it did; it is held in its write path
		// after its lookup found the blob.
		store func(r *dedupRace, h ident.Hash, data []byte) (uint64, error)
	}{
		{
			name: "put",
			store: func(r *dedupRace, h ident.Hash, data []byte) (uint64, error) {
				_, err := r.e.PutBlob(context.Background(), r.keep, h, data)
				return 0, err
			},
		},
		{
			name: "append",
			store: func(r *dedupRace, _ ident.Hash, data []byte) (uint64, error) {
				return r.append(data)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newDedupRace(t)
			ctx := context.Background()
			var h ident.Hash
			for k := range r.dead {
				h = k
				break
			}
			data := r.dead[h]

			r.armed.Store(true)
			type write struct {
				turn uint64
				err  error
			}
			stored := make(chan write, 1)
			go func() {
				turn, err := tt.store(r, h, data)
				stored <- write{turn, err}
			}()
			select {
			case <-r.held:
			case w := <-stored:
				t.Fatalf("the %s was not held after its lookup: %v", tt.name, w.err)
			}

			type outcome struct {
				res compact.Result
				err error
			}
			compacted := make(chan outcome, 1)
			go func() {
				res, err := r.e.CompactPackSegment(ctx, 0)
				compacted <- outcome{res, err}
			}()
			var got outcome
			gotEarly := false
			select {
			case <-r.waits:
			case got = <-compacted:
				gotEarly = true
				t.Errorf("the compaction ended (%+v, %v) while a %s that found its blob before it began was in flight", got.res, got.err, tt.name)
			}
			close(r.release)
			w := <-stored
			if w.err != nil {
				t.Fatalf("the %s: %v", tt.name, w.err)
			}
			if !gotEarly {
				got = <-compacted
			}
			if got.err != nil || got.res.Dropped != len(r.dead)-1 {
				t.Fatalf("compaction: %+v, %v; want %d blobs dropped", got.res, got.err, len(r.dead)-1)
			}
			read := func() {
				t.Helper()
				b, err := r.e.GetBlob(ctx, r.keep, h)
				if err != nil || !bytes.Equal(b, data) {
					t.Errorf("the blob the %s stored: %d bytes, %v", tt.name, len(b), err)
				}
				if w.turn == 0 {
					return
				}
				p, err := r.e.TurnPayload(ctx, r.keep, w.turn)
				if err != nil || !bytes.Equal(p, data) {
					t.Errorf("the payload of the turn appended: %d bytes, %v", len(p), err)
				}
			}
			read()
			if err := r.e.Close(); err != nil {
				t.Fatal(err)
			}
			v, err := salvage.Verify(ctx, r.dir, r.pool, nil)
			if err != nil || !v.OK() {
				t.Errorf("verify: %+v, %v", v, err)
			}
			r.open()
			read()
		})
	}
}
