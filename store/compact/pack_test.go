package compact_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	"github.com/cardboxhq/cardbox/store/segment"
)

// packSegmentSize makes blob-pack segments of about ten of the fixture's
// blobs.
const packSegmentSize = 4 << 10

// packFixture is a store whose blob pack spans many sealed segments,
// holding the blobs of a live tenant and of a deleted one interleaved in
// every segment, one blob of the deleted tenant that the live one stored
// too (a claim in tenant_blobs), and the live tenant's turns.
type packFixture struct {
	t    *testing.T
	dir  string
	pool *pgxpool.Pool
	hook func(compact.Step) error

	live map[ident.Hash][]byte // blobs the live tenant reads
	dead map[ident.Hash][]byte // blobs no tenant claims
	// turns are the live tenant's turns and their payloads.
	turns map[uint64][]byte
}

const (
	keeper = "keeper"
	leaver = "leaver"
)

// blob returns n bytes that do not compress, different for each seed.
func blob(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func newPackFixture(t *testing.T) *packFixture {
	t.Helper()
	f := &packFixture{t: t, dir: t.TempDir(), pool: pgtest.NewPool(t),
		live: map[ident.Hash][]byte{}, dead: map[ident.Hash][]byte{}, turns: map[uint64][]byte{}}
	for _, id := range []string{keeper, leaver} {
		if _, err := f.pool.Exec(context.Background(), `INSERT INTO tenants (tenant_id) VALUES ($1)`, id); err != nil {
			t.Fatal(err)
		}
	}
	e := f.open()
	defer e.Close()
	ctx := context.Background()
	keep, leave := f.tenant(e, keeper), f.tenant(e, leaver)
	c, err := e.CreateContext(ctx, keep, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(1)
	put := func(ten ident.Tenant, into map[ident.Hash][]byte) ident.Hash {
		seed++
		data := blob(seed, 200+int(seed%5)*40)
		h := blake3.Sum256(data)
		if _, err := e.PutBlob(ctx, ten, h, data); err != nil {
			t.Fatalf("put a blob of %s: %v", ten.ID, err)
		}
		if into != nil {
			into[h] = data
		}
		return h
	}
	for i := range 40 {
		put(keep, f.live)
		// Two dead blobs for each live one: most of every segment dies.
		put(leave, f.dead)
		put(leave, f.dead)
		if i%5 == 0 {
			seed++
			f.appendTurn(e, keep, c.ContextID, blob(seed, 300))
		}
	}
	// A blob the leaver stored first and the keeper stored after it: the
	// keeper's claim keeps it.
	shared := put(leave, nil)
	data := blob(seed, 200+int(seed%5)*40)
	if _, err := e.PutBlob(ctx, keep, shared, data); err != nil {
		t.Fatal(err)
	}
	f.live[shared] = data
	// Segments of dead blobs alone, which compact to nothing, closed by
	// a segment's worth of live blobs.
	for range 30 {
		put(leave, f.dead)
	}
	for range packSegmentSize / 200 {
		put(keep, f.live)
	}
	// The pack's committed end moves with the groups that append turns:
	// one more makes every closed segment committed, so that it is sealed.
	seed++
	f.appendTurn(e, keep, c.ContextID, blob(seed, 300))

	pgtest.MarkTenantDeleted(t, f.pool, leaver)
	pgtest.PurgeDeletedTenant(t, f.pool, leaver)
	if _, err := e.ForgetTenant(ctx, leaver); err != nil {
		t.Fatal(err)
	}
	waitPackSealed(t, e)
	f.checkReads(e)
	return f
}

// appendTurn appends a turn of payload p to the context and remembers it.
func (f *packFixture) appendTurn(e *store.Engine, ten ident.Tenant, contextID uint64, p []byte) {
	f.t.Helper()
	r, err := e.Append(context.Background(), ten, &store.AppendRequest{
		ContextID: contextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
		UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
	})
	if err != nil {
		f.t.Fatalf("append: %v", err)
	}
	f.turns[r.TurnID] = p
}

func (f *packFixture) open() *store.Engine {
	f.t.Helper()
	hook := func(s compact.Step) error {
		if f.hook == nil {
			return nil
		}
		return f.hook(s)
	}
	e, err := store.Open(context.Background(), store.Options{
		Dir: f.dir, Pool: f.pool, SegmentSize: packSegmentSize, FileReserve: -1, CompactionHook: hook,
	})
	if err != nil {
		f.t.Fatalf("open the store: %v", err)
	}
	return e
}

func (f *packFixture) tenant(e *store.Engine, id string) ident.Tenant {
	f.t.Helper()
	ten, err := e.Tenant(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return ten
}

// checkReads checks that every live blob and turn payload reads byte for
// byte.
func (f *packFixture) checkReads(e *store.Engine) {
	f.t.Helper()
	ctx := context.Background()
	keep := f.tenant(e, keeper)
	for h, want := range f.live {
		got, err := e.GetBlob(ctx, keep, h)
		if err != nil || !bytes.Equal(got, want) {
			f.t.Errorf("live blob %x: %d bytes, %v", h[:6], len(got), err)
		}
	}
	for id, want := range f.turns {
		got, err := e.TurnPayload(ctx, keep, id)
		if err != nil || !bytes.Equal(got, want) {
			f.t.Errorf("payload of turn %d: %d bytes, %v", id, len(got), err)
		}
	}
}

// packed returns the blobs the pack's files hold, read offline.
func (f *packFixture) packed() map[ident.Hash]bool {
	f.t.Helper()
	in := map[ident.Hash]bool{}
	defects, err := blobpack.Verify(store.BlobDir(f.dir), func(e blobpack.Entry) { in[e.Hash] = true }, nil)
	if err != nil || len(defects) > 0 {
		f.t.Fatalf("read the blob pack: %v, %v", defects, err)
	}
	return in
}

// checkFiles checks that the pack's files hold every live blob and, once
// compacted, no dead one.
func (f *packFixture) checkFiles(compacted bool) {
	f.t.Helper()
	in := f.packed()
	for h := range f.live {
		if !in[h] {
			f.t.Errorf("live blob %x is not in the pack's files", h[:6])
		}
	}
	left := 0
	for h := range f.dead {
		if in[h] {
			left++
		}
	}
	if compacted && left > 0 {
		f.t.Errorf("%d of %d dead blobs are still in the pack's files", left, len(f.dead))
	}
	if !compacted && left != len(f.dead) {
		f.t.Errorf("before compaction, %d of %d dead blobs are in the pack's files", left, len(f.dead))
	}
}

func (f *packFixture) verify() {
	f.t.Helper()
	r, err := salvage.Verify(context.Background(), f.dir, f.pool, nil)
	if err != nil {
		f.t.Fatalf("verify: %v", err)
	}
	if !r.OK() {
		f.t.Errorf("verify: %+v", r)
	}
}

// packFiles returns the pack directory's files and their sizes.
func (f *packFixture) packFiles() map[string]int64 {
	f.t.Helper()
	entries, err := os.ReadDir(store.BlobDir(f.dir))
	if err != nil {
		f.t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, en := range entries {
		fi, err := en.Info()
		if err != nil {
			f.t.Fatal(err)
		}
		if strings.HasPrefix(en.Name(), blobpack.PackFile) {
			sizes[en.Name()] = fi.Size()
		}
	}
	return sizes
}

// waitPackSealed waits until every closed segment of the blob pack is
// sealed.
func waitPackSealed(t *testing.T, e *store.Engine) {
	t.Helper()
	waitfor.True(t, "the blob pack's closed segments sealed", 30*time.Second, func() bool {
		sealed := 0
		for _, s := range e.Stats().Segments {
			if s.File == store.FileBlobs && s.State == store.SegmentClosed && s.Count > 0 {
				return false
			}
			if s.File == store.FileBlobs && s.State == store.SegmentSealed {
				sealed = s.Count
			}
		}
		return sealed > 0
	})
}

// Compacting every sealed segment of the pack drops the blobs no tenant
// claims: the files shrink, every live blob and payload reads byte for
// byte, the dead ones are gone from the files, puts go on, and a restart
// (reading blobs.idx, not scanning) and cardbox verify find the store
// clean.
func TestCompactPack(t *testing.T) {
	t.Parallel()
	f := newPackFixture(t)
	f.checkFiles(false)
	before := f.packFiles()
	e := f.open()
	ctx := context.Background()
	var progress []int
	results, err := e.CompactPackReporting(ctx, func(done, total int, _ compact.Result) { progress = append(progress, done, total) })
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	if len(progress) != 2*(len(results)+1) || progress[len(progress)-1] != len(results) {
		t.Errorf("progress %v for %d segments", progress, len(results))
	}
	dropped, reclaimed := 0, int64(0)
	for _, r := range results {
		dropped += r.Dropped
		reclaimed += r.Reclaimed()
		if r.Dropped > 0 && r.New.Gen != r.Old.Gen+1 {
			t.Errorf("compaction result %+v", r)
		}
	}
	if !slices.ContainsFunc(results, func(r compact.Result) bool { return r.Dropped > 0 && r.After == 0 }) {
		t.Errorf("no segment of dead blobs alone compacted to nothing: %+v", results)
	}
	if dropped < len(f.dead)*3/4 {
		t.Fatalf("%d segments compacted, %d records dropped of %d dead blobs: %+v", len(results), dropped, len(f.dead), results)
	}
	after := f.packFiles()
	if got := total(before) - total(after); got != reclaimed || got < int64(dropped)*200 {
		t.Errorf("the pack shrank by %d bytes (%d -> %d files), the compactions say %d", got, len(before), len(after), reclaimed)
	}
	if len(after) != len(before) {
		t.Errorf("pack files: %v before, %v after: an old generation was left", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	f.checkReads(e)

	// A second compaction finds nothing to drop; puts go on.
	again, err := e.CompactPackReporting(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again {
		if r.Dropped > 0 || r.New != r.Old {
			t.Errorf("a second compaction rewrote %+v", r)
		}
	}
	data := blob(999, 250)
	h := blake3.Sum256(data)
	if _, err := e.PutBlob(ctx, f.tenant(e, keeper), h, data); err != nil {
		t.Fatal(err)
	}
	f.live[h] = data
	f.checkReads(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	f.checkFiles(true)
	f.verify()

	// blobs.idx names the rewrites: a start reads it and scans nothing.
	p, err := blobpack.Open(store.BlobDir(f.dir), blobpack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := p.Recovery()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if rec.Scanned != 0 || rec.IndexDropped != 0 || rec.Indexed == 0 {
		t.Errorf("opening the compacted pack: %+v", rec)
	}
	e = f.open()
	defer e.Close()
	f.checkReads(e)
}

// errKilled stands for a kill at a step of a compaction of the pack.
var errKilled = errors.New("killed")

// packRewrite is the name of the rewrite of the pack's first segment.
var packRewrite = blobpack.Layout("").Name(segment.ID{Start: 0, Gen: 1})

// A compaction of the pack killed after each of its steps: the next start
// keeps the generation Postgres names, removes the other, and every live
// blob reads byte for byte; cardbox verify is clean; compacting again
// finishes and drops the dead blobs.
func TestPackCompactionCrashes(t *testing.T) {
	t.Parallel()
	for _, step := range []compact.Step{compact.Written, compact.Synced, compact.Swapped, compact.Installed} {
		t.Run(step.String(), func(t *testing.T) {
			t.Parallel()
			f := newPackFixture(t)
			f.hook = func(s compact.Step) error {
				if s == step {
					return errKilled
				}
				return nil
			}
			e := f.open()
			if _, err := e.CompactPackSegment(context.Background(), 0); !errors.Is(err, errKilled) {
				t.Fatalf("compaction killed after %s: %v", step, err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			files := f.packFiles()
			if _, ok := files[packRewrite]; !ok || files[blobpack.PackFile] == 0 {
				t.Fatalf("killed after %s, the pack holds %v", step, files)
			}

			f.hook = nil
			e = f.open()
			files = f.packFiles()
			_, oldThere := files[blobpack.PackFile]
			_, newThere := files[packRewrite]
			if swapped := step >= compact.Swapped; oldThere == swapped || newThere != swapped {
				t.Errorf("killed after %s, the start left %v", step, slices.Sorted(maps.Keys(files)))
			}
			f.checkReads(e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			f.verify()

			e = f.open()
			if _, err := e.CompactPackReporting(context.Background(), nil); err != nil {
				t.Fatalf("compacting again: %v", err)
			}
			f.checkReads(e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			f.checkFiles(true)
			f.verify()
		})
	}
}

// A compaction of the pack that failed at its swap, its outcome perhaps
// unknown to the process: the next compaction of the segment, without a
// restart, removes the rewrite and starts again, or finishes the swap.
func TestPackCompactionResumesWithoutRestart(t *testing.T) {
	t.Parallel()
	for _, step := range []compact.Step{compact.Synced, compact.Swapped} {
		t.Run(step.String(), func(t *testing.T) {
			t.Parallel()
			f := newPackFixture(t)
			e := f.open()
			defer e.Close()
			f.hook = func(s compact.Step) error {
				if s == step {
					return errKilled
				}
				return nil
			}
			if _, err := e.CompactPackSegment(context.Background(), 0); !errors.Is(err, errKilled) {
				t.Fatalf("compaction failed after %s: %v", step, err)
			}
			f.checkReads(e)
			f.hook = nil
			res, err := e.CompactPackSegment(context.Background(), 0)
			if err != nil {
				t.Fatalf("compacting again: %v", err)
			}
			if res.New != (segment.ID{Start: 0, Gen: 1}) {
				t.Errorf("compacting again after %s: %+v", step, res)
			}
			if _, ok := f.packFiles()[blobpack.PackFile]; ok {
				t.Errorf("the old generation is left: %v", f.packFiles())
			}
			counted := func() bool {
				for _, s := range e.DeadBlobSegments() {
					if s.Start == 0 {
						return true
					}
				}
				return false
			}
			if step == compact.Swapped {
				// Finishing the swap asked Postgres nothing: the count
				// stays, and the next compaction settles it.
				if !counted() {
					t.Errorf("after finishing the swap: %+v; want the segment's dead bytes still counted", e.DeadBlobSegments())
				}
				if _, err := e.CompactPackSegment(context.Background(), 0); err != nil {
					t.Fatal(err)
				}
			}
			if counted() {
				t.Errorf("after a compaction that asked: %+v; want the segment's count settled", e.DeadBlobSegments())
			}
			f.checkReads(e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			f.verify()
		})
	}
}

// A put and an append of the bytes of blobs a running compaction drops,
// after it decided so (its rewrite written without them): both store the
// bytes again, the compaction goes on, and the blobs read after it, after
// a restart, and in cardbox verify.
func TestPackCompactionKeepsBlobsStoredAgain(t *testing.T) {
	t.Parallel()
	f := newPackFixture(t)
	e := f.open()
	ctx := context.Background()
	keep := f.tenant(e, keeper)
	// The dead blobs of the first segment, in the pack's files.
	var first []ident.Hash
	for h := range f.dead {
		first = append(first, h)
	}
	var inFirst []ident.Hash
	sums := map[ident.Hash]bool{}
	if _, _, err := blobpack.SegmentRecords(ctx, filepath.Join(store.BlobDir(f.dir), blobpack.PackFile), 0,
		func(_ []byte, en blobpack.Entry) error {
			sums[en.Hash] = true
			return nil
		}); err != nil {
		t.Fatal(err)
	}
	for _, h := range first {
		if sums[h] {
			inFirst = append(inFirst, h)
		}
	}
	if len(inFirst) < 2 {
		t.Fatalf("%d dead blobs in the first segment", len(inFirst))
	}
	put, appended := inFirst[0], inFirst[1]
	c, err := e.CreateContext(ctx, keep, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var hookErr error
	ran := false
	f.hook = func(s compact.Step) error {
		if s != compact.Written || ran {
			return nil
		}
		ran = true
		// The rewrite is written without both blobs; store them again.
		if _, err := e.PutBlob(ctx, keep, put, f.dead[put]); err != nil {
			hookErr = fmt.Errorf("put: %w", err)
			return nil
		}
		p := f.dead[appended]
		r, err := e.Append(ctx, keep, &store.AppendRequest{
			ContextID: c.ContextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
			UncompressedLen: uint32(len(p)), ContentHash: appended, Payload: p,
		})
		if err != nil {
			hookErr = fmt.Errorf("append: %w", err)
			return nil
		}
		f.turns[r.TurnID] = p
		return nil
	}
	res, err := e.CompactPackSegment(ctx, 0)
	if err != nil || hookErr != nil || !ran {
		t.Fatalf("compaction: %+v, %v; in it: %v (ran %v)", res, err, hookErr, ran)
	}
	if res.Dropped == 0 {
		t.Fatalf("the compaction dropped nothing: %+v", res)
	}
	f.hook = nil
	f.live[put], f.live[appended] = f.dead[put], f.dead[appended]
	delete(f.dead, put)
	delete(f.dead, appended)
	f.checkReads(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if in := f.packed(); !in[put] || !in[appended] {
		t.Errorf("blobs stored again during the compaction: in the files %v, %v", in[put], in[appended])
	}
	f.verify()
	e = f.open()
	defer e.Close()
	f.checkReads(e)
}

// A claim to a blob the compaction drops, committed after it asked (a
// tenant storing the bytes as the compaction decided), fails the swap:
// the blob stays, and compacting again keeps it.
func TestPackCompactionSwapRechecksClaims(t *testing.T) {
	t.Parallel()
	f := newPackFixture(t)
	e := f.open()
	defer e.Close()
	ctx := context.Background()
	var claimed ident.Hash
	if _, _, err := blobpack.SegmentRecords(ctx, filepath.Join(store.BlobDir(f.dir), blobpack.PackFile), 0,
		func(_ []byte, en blobpack.Entry) error {
			if _, ok := f.dead[en.Hash]; ok && claimed == (ident.Hash{}) {
				claimed = en.Hash
			}
			return nil
		}); err != nil {
		t.Fatal(err)
	}
	f.hook = func(s compact.Step) error {
		if s == compact.Synced {
			_, err := f.pool.Exec(ctx, `INSERT INTO tenant_blobs (tenant_id, blob_hash) VALUES ($1, $2)`, keeper, claimed[:])
			return err
		}
		return nil
	}
	if _, err := e.CompactPackSegment(ctx, 0); err == nil || !strings.Contains(err.Error(), "claimed again") {
		t.Fatalf("compaction with a claim committed before its swap: %v", err)
	}
	f.hook = nil
	f.live[claimed] = f.dead[claimed]
	delete(f.dead, claimed)
	res, err := e.CompactPackSegment(ctx, 0)
	if err != nil || res.Dropped == 0 {
		t.Fatalf("compacting again: %+v, %v", res, err)
	}
	f.checkReads(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !f.packed()[claimed] {
		t.Error("the claimed blob is not in the pack's files")
	}
	f.verify()
}
