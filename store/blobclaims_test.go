package store

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
)

// newClockedStore is a testStore on clock.
func newClockedStore(t *testing.T, clock *testkit.Clock) *testStore {
	t.Helper()
	s := &testStore{t: t, dir: t.TempDir(), pool: pgtest.NewPool(t), now: clock.Now}
	s.open(nil)
	return s
}

func (s *testStore) put(t ident.Tenant, data []byte) ident.Hash {
	s.t.Helper()
	h := blake3.Sum256(data)
	if _, err := s.PutBlob(context.Background(), t, h, data); err != nil {
		s.t.Fatalf("put blob: %v", err)
	}
	return h
}

// reap runs the reaper to the end.
func (s *testStore) reap() ReapStats {
	s.t.Helper()
	stats, err := s.ReapDeleted(context.Background())
	if err != nil {
		s.t.Fatalf("reap: %v", err)
	}
	return stats
}

// wantBlobs checks which blobs the tenant reads, over GetBlob and
// MissingBlobs alike.
func (s *testStore) wantBlobs(t ident.Tenant, want map[ident.Hash]bool) {
	s.t.Helper()
	var hashes []ident.Hash
	for h, readable := range want {
		hashes = append(hashes, h)
		_, err := s.GetBlob(context.Background(), t, h)
		switch {
		case readable && err != nil:
			s.t.Errorf("tenant %s: blob %x: %v, want it read", t.ID, h[:4], err)
		case !readable && fault.KindOf(err) != fault.NotFound:
			s.t.Errorf("tenant %s: blob %x: got %v, want not found", t.ID, h[:4], err)
		}
	}
	missing, err := s.MissingBlobs(context.Background(), t, hashes)
	if err != nil {
		s.t.Fatal(err)
	}
	isMissing := map[ident.Hash]bool{}
	for _, h := range missing {
		isMissing[h] = true
	}
	for h, readable := range want {
		if isMissing[h] == readable {
			s.t.Errorf("tenant %s: blob %x missing = %v, want %v", t.ID, h[:4], isMissing[h], !readable)
		}
	}
}

func fsTree(files ...ident.Hash) []byte {
	var entries []fstree.Entry
	for i, h := range files {
		entries = append(entries, fstree.Entry{Name: string(rune('a' + i)), Kind: fstree.KindFile, Hash: h, HashOK: true})
	}
	return fstree.Encode(entries)
}

// A deleted context's blobs stop being its tenant's once the reaper has
// buried its turns and their grace has passed, whether the tenant stored
// them first or after another tenant; the other tenant keeps reading
// them; storing them again claims them again; a restart keeps it all.
func TestReaperReleasesBlobClaims(t *testing.T) {
	clock := testkit.NewClock(time.Now())
	s := newClockedStore(t, clock)
	ctx := context.Background()
	acme, bravo := s.tenant("acme"), s.tenant("bravo")

	payload := []byte("a payload acme stored first")
	ph := blake3.Sum256(payload)
	ca := s.create(acme, 0)
	s.append(acme, turnReq(ca.ContextID, 0, payload))
	cb := s.create(bravo, 0)
	s.append(bravo, turnReq(cb.ContextID, 0, payload)) // a grant

	file := []byte("a file acme uploaded")
	fh := s.put(acme, file)
	tree := fsTree(fh)
	th := s.put(acme, tree)
	withFS := []byte("the turn the fs tree is attached to")
	wh := blake3.Sum256(withFS)
	r := s.append(acme, turnReq(ca.ContextID, 0, withFS))
	if err := s.AttachFS(ctx, acme, r.TurnID, th); err != nil {
		t.Fatal(err)
	}
	s.put(bravo, file) // a grant

	other := []byte("bytes bravo stored first")
	oh := blake3.Sum256(other)
	s.append(bravo, turnReq(cb.ContextID, 0, other))
	s.append(acme, turnReq(ca.ContextID, 0, other)) // acme's grant

	acmes := map[ident.Hash]bool{ph: true, fh: true, th: true, wh: true, oh: true}
	s.wantBlobs(acme, acmes)
	bravoBefore := s.Usage(bravo)

	clock.Add(DefaultBlobClaimGrace + time.Minute)
	if err := s.DeleteContext(ctx, acme, ca.ContextID, "test"); err != nil {
		t.Fatal(err)
	}
	s.reap() // the reaper woken by the deletion may have released them already
	gone := map[ident.Hash]bool{ph: false, fh: false, th: false, wh: false, oh: false}
	check := func() {
		t.Helper()
		s.wantBlobs(acme, gone)
		s.wantBlobs(bravo, map[ident.Hash]bool{ph: true, fh: true, oh: true, th: false})
		if u := s.Usage(acme); u != 0 {
			t.Errorf("acme stores %d bytes, want 0", u)
		}
		if u := s.Usage(bravo); u != bravoBefore {
			t.Errorf("bravo stores %d bytes, was %d", u, bravoBefore)
		}
		if n := s.countRows("blob_claim_reviews"); n != 0 {
			t.Errorf("%d reviews left", n)
		}
	}
	check()
	if n := s.countRows("released_blob_claims"); n != 4 {
		t.Errorf("released_blob_claims has %d rows, want acme's first writes", n)
	}
	s.reopen()
	check()

	// Uploading or appending the bytes again claims them again.
	if isNew, err := s.PutBlob(ctx, acme, fh, file); err != nil || !isNew {
		t.Fatalf("put again: new %v, %v; want a new blob", isNew, err)
	}
	c2 := s.create(acme, 0)
	s.append(acme, turnReq(c2.ContextID, 0, payload))
	want := map[ident.Hash]bool{fh: true, ph: true, th: false, wh: false, oh: false}
	wantUsage := int64(len(file)+len(payload)) + TurnCharge + ContextCharge
	check = func() {
		t.Helper()
		s.wantBlobs(acme, want)
		if got, err := s.GetBlob(ctx, acme, fh); err != nil || !bytes.Equal(got, file) {
			t.Errorf("file: %q %v", got, err)
		}
		if u := s.Usage(acme); u != wantUsage {
			t.Errorf("acme stores %d bytes, want %d", u, wantUsage)
		}
	}
	check()
	s.reopen()
	check()
	// A tree whose blobs were released is not whole any more.
	wantKind(t, s.AttachFS(ctx, acme, s.last(acme, c2.ContextID, 1, false)[0].ID, th), fault.NotFound)
}

// What the tenant still needs keeps its claim: a live fork's turns, a
// live turn's fs tree, an upload younger than the grace (until it ends).
func TestReaperKeepsNeededBlobClaims(t *testing.T) {
	clock := testkit.NewClock(time.Now())
	s := newClockedStore(t, clock)
	ctx := context.Background()
	acme := s.tenant("acme")

	shared := []byte("a turn a fork keeps")
	sh := blake3.Sum256(shared)
	dying := []byte("a turn that dies")
	dh := blake3.Sum256(dying)
	file := []byte("a file a live turn's tree reaches")
	fh := s.put(acme, file)
	th := s.put(acme, fsTree(fh))
	uploaded := []byte("uploaded just now")

	c1 := s.create(acme, 0)
	base := s.append(acme, turnReq(c1.ContextID, 0, shared)).TurnID
	s.create(acme, base) // a live fork
	r := s.append(acme, turnReq(c1.ContextID, 0, dying))
	if err := s.AttachFS(ctx, acme, r.TurnID, th); err != nil {
		t.Fatal(err)
	}
	c3 := s.create(acme, 0)
	r3 := s.append(acme, turnReq(c3.ContextID, 0, []byte("a live turn with the same tree")))
	if err := s.AttachFS(ctx, acme, r3.TurnID, th); err != nil {
		t.Fatal(err)
	}
	clock.Add(DefaultBlobClaimGrace + time.Minute)
	uh := s.put(acme, uploaded) // younger than the grace
	s.append(acme, turnReq(c1.ContextID, 0, uploaded))

	s.deleteContext(acme, c1.ContextID)
	s.wantBlobs(acme, map[ident.Hash]bool{sh: true, dh: false, fh: true, th: true, uh: true})
	if stats := s.reap(); stats.NextClaimReview.IsZero() {
		t.Fatal("no review deferred to the end of the upload's grace")
	}
	s.reopen()
	s.wantBlobs(acme, map[ident.Hash]bool{sh: true, dh: false, fh: true, th: true, uh: true})

	clock.Add(DefaultBlobClaimGrace)
	s.reap()
	s.wantBlobs(acme, map[ident.Hash]bool{sh: true, dh: false, fh: true, th: true, uh: false})
	if n := s.countRows("blob_claim_reviews"); n != 0 {
		t.Errorf("%d reviews left", n)
	}
	if n := s.countRows("blob_puts"); n != 0 {
		t.Errorf("%d uploads older than the grace kept", n)
	}
}

// An upload racing the release of its blob's claim is either seen by the
// release (which keeps the claim) or claims the blob again after it: an
// upload answered OK is always followed by a read. Here the upload, an
// append and an fs attachment come between the release's working out
// what the tenant needs and its commit.
func TestWritesRacingReleaseKeepTheirBlobs(t *testing.T) {
	tests := []struct {
		name  string
		write func(s *testStore, acme ident.Tenant, data []byte) error
	}{
		{"upload", func(s *testStore, acme ident.Tenant, data []byte) error {
			_, err := s.PutBlob(context.Background(), acme, blake3.Sum256(data), data)
			return err
		}},
		{"append", func(s *testStore, acme ident.Tenant, data []byte) error {
			c, err := s.CreateContext(context.Background(), acme, 0, "")
			if err != nil {
				return err
			}
			_, err = s.Append(context.Background(), acme, turnReq(c.ContextID, 0, data))
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := testkit.NewClock(time.Now())
			s := &testStore{t: t, dir: t.TempDir(), pool: pgtest.NewPool(t), now: clock.Now}
			var once sync.Once
			var acme ident.Tenant
			data := []byte("bytes written while their claim is released")
			var writeErr error
			s.beforeRelease = func() { once.Do(func() { writeErr = tt.write(s, acme, data) }) }
			s.open(nil)
			ctx := context.Background()
			acme = s.tenant("acme")
			c := s.create(acme, 0)
			s.append(acme, turnReq(c.ContextID, 0, data))
			clock.Add(DefaultBlobClaimGrace + time.Minute)
			if err := s.DeleteContext(ctx, acme, c.ContextID, "test"); err != nil {
				t.Fatal(err)
			}
			s.reap()
			if writeErr != nil {
				t.Fatalf("the racing write: %v", writeErr)
			}
			s.wantBlobs(acme, map[ident.Hash]bool{blake3.Sum256(data): true})
			s.reopen()
			s.wantBlobs(acme, map[ident.Hash]bool{blake3.Sum256(data): true})
		})
	}
}

// A tenant that keeps writing does not hold its claims back: a write
// naming other blobs between the release's working out and its commit
// (an append, an upload) leaves the release to commit at once, and the
// blob it releases reads as never stored. Only a write naming a blob
// being released, or attaching an fs root, makes it look again.
func TestReleaseGoesOnBesideUnrelatedWrites(t *testing.T) {
	clock := testkit.NewClock(time.Now())
	s := &testStore{t: t, dir: t.TempDir(), pool: pgtest.NewPool(t), now: clock.Now}
	var acme ident.Tenant
	var live uint64
	calls, writeErr := 0, error(nil)
	s.beforeRelease = func() {
		calls++
		other := []byte(fmt.Sprintf("other bytes %d", calls))
		if _, err := s.Append(context.Background(), acme, turnReq(live, 0, other)); err != nil {
			writeErr = err
		}
		if _, err := s.PutBlob(context.Background(), acme, blake3.Sum256(other), other); err != nil {
			writeErr = err
		}
	}
	s.open(nil)
	ctx := context.Background()
	acme = s.tenant("acme")
	live = s.create(acme, 0).ContextID
	c := s.create(acme, 0)
	data := []byte("bytes whose claim goes while the tenant writes others")
	s.append(acme, turnReq(c.ContextID, 0, data))
	if err := s.DeleteContext(ctx, acme, c.ContextID, "test"); err != nil {
		t.Fatal(err)
	}
	s.reap()
	if writeErr != nil {
		t.Fatalf("the writes beside the release: %v", writeErr)
	}
	if calls != 1 {
		t.Errorf("the release worked out what to release %d times; want once, the writes beside it naming other blobs", calls)
	}
	s.wantBlobs(acme, map[ident.Hash]bool{blake3.Sum256(data): false})
}

// Uploads racing the reaper, without hooks: every upload answered OK is
// read.
func TestUploadRacingReleaseKeepsTheBlob(t *testing.T) {
	clock := testkit.NewClock(time.Now())
	s := newClockedStore(t, clock)
	ctx := context.Background()
	acme := s.tenant("acme")
	const n = 20
	var payloads [][]byte
	c := s.create(acme, 0)
	for i := range n {
		p := payloadN(1000 + i)
		payloads = append(payloads, p)
		s.append(acme, turnReq(c.ContextID, 0, p))
	}
	clock.Add(DefaultBlobClaimGrace + time.Minute)
	if err := s.DeleteContext(ctx, acme, c.ContextID, "test"); err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for _, p := range payloads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			h := blake3.Sum256(p)
			if _, err := s.PutBlob(ctx, acme, h, p); err != nil {
				errs <- err
				return
			}
			if _, err := s.GetBlob(ctx, acme, h); err != nil {
				errs <- err
			}
		}()
	}
	reaped := make(chan error, 1)
	go func() {
		<-start
		_, err := s.ReapDeleted(ctx)
		reaped <- err
	}()
	close(start)
	wg.Wait()
	if err := <-reaped; err != nil {
		t.Fatalf("reap: %v", err)
	}
	close(errs)
	for err := range errs {
		t.Errorf("an upload answered OK, then: %v", err)
	}
	s.reap() // whatever was pending
	for _, p := range payloads {
		if _, err := s.GetBlob(ctx, acme, blake3.Sum256(p)); err != nil {
			t.Errorf("after the reaping: %v", err)
		}
	}
}

// A batch released in several statements releases them all.
func TestReleaseInChunks(t *testing.T) {
	old := releaseChunk
	releaseChunk = 2
	t.Cleanup(func() { releaseChunk = old })
	clock := testkit.NewClock(time.Now())
	s := newClockedStore(t, clock)
	acme := s.tenant("acme")
	c := s.create(acme, 0)
	want := map[ident.Hash]bool{}
	for i := range 7 {
		p := payloadN(2000 + i)
		s.append(acme, turnReq(c.ContextID, 0, p))
		want[blake3.Sum256(p)] = false
	}
	clock.Add(DefaultBlobClaimGrace + time.Minute)
	s.deleteContext(acme, c.ContextID)
	s.reap()
	s.wantBlobs(acme, want)
	if n := s.countRows("released_blob_claims"); n != 7 {
		t.Errorf("%d claims released, want 7", n)
	}
	if u := s.Usage(acme); u != 0 {
		t.Errorf("acme stores %d bytes, want 0", u)
	}
}

// UnclaimedBlobs names the blobs no tenant claims: their first writer is
// deleted or released its claim, and no tenant holds a grant.
func TestUnclaimedBlobs(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	s.tenant("acme")
	s.tenant("bravo")
	s.tenant("ghost")
	h := func(i byte) []byte { return bytes.Repeat([]byte{i}, 32) }
	for _, q := range []string{
		`UPDATE tenants SET deleted_at = now() WHERE tenant_id = 'ghost'`,
		`INSERT INTO released_blob_claims (tenant_id, blob_hash) VALUES ('acme', '\x` + hexOf(h(1)) + `')`,
		`INSERT INTO released_blob_claims (tenant_id, blob_hash) VALUES ('acme', '\x` + hexOf(h(2)) + `')`,
		`INSERT INTO tenant_blobs (tenant_id, blob_hash) VALUES ('bravo', '\x` + hexOf(h(2)) + `')`,
		`INSERT INTO tenant_blobs (tenant_id, blob_hash) VALUES ('bravo', '\x` + hexOf(h(5)) + `')`,
		`INSERT INTO released_blob_claims (tenant_id, blob_hash) VALUES ('bravo', '\x` + hexOf(h(6)) + `')`,
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tests := []struct {
		name        string
		hash        []byte
		firstWriter string
		unclaimed   bool
	}{
		{"released, no grant", h(1), "acme", true},
		{"released, another tenant's grant", h(2), "acme", false},
		{"deleted first writer, no grant", h(3), "ghost", true},
		{"live first writer", h(4), "acme", false},
		{"deleted first writer, a grant", h(5), "ghost", false},
		{"another tenant released the same bytes", h(6), "acme", false},
		{"unknown first writer", h(7), "nobody", false},
	}
	var hashes [][]byte
	var writers []string
	for _, tt := range tests {
		hashes = append(hashes, tt.hash)
		writers = append(writers, tt.firstWriter)
	}
	got, err := s.as(pgrole.Sweeper, "").UnclaimedBlobs(ctx, storedb.UnclaimedBlobsParams{BlobHashes: hashes, FirstWriters: writers})
	if err != nil {
		t.Fatal(err)
	}
	unclaimed := map[string]bool{}
	for _, g := range got {
		unclaimed[string(g)] = true
	}
	for _, tt := range tests {
		if unclaimed[string(tt.hash)] != tt.unclaimed {
			t.Errorf("%s: unclaimed = %v, want %v", tt.name, unclaimed[string(tt.hash)], tt.unclaimed)
		}
	}
	// A compaction that drops the blobs forgets their released claims.
	if err := s.as(pgrole.Sweeper, "").DropReleasedBlobClaims(ctx, [][]byte{h(1), h(6)}); err != nil {
		t.Fatal(err)
	}
	if n := s.countRows("released_blob_claims"); n != 1 {
		t.Errorf("%d released claims left, want the one of a blob not dropped", n)
	}
}

func hexOf(b []byte) string { return fmt.Sprintf("%x", b) }

// An upload writes its row of blob_puts again only once the row it wrote
// is older than a quarter of the grace; a restart writes it at once.
func TestRecordPutWritesRowsSeldom(t *testing.T) {
	clock := testkit.NewClock(time.Now().Truncate(time.Second))
	s := newClockedStore(t, clock)
	acme := s.tenant("acme")
	data := []byte("bytes acme uploads again and again")
	putAt := func() time.Time {
		t.Helper()
		var at time.Time
		if err := s.pool.QueryRow(context.Background(), `SELECT put_at FROM blob_puts WHERE tenant_id = 'acme'`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	first := clock.Now()
	s.put(acme, data)
	fresh := DefaultBlobClaimGrace / putRewrite
	steps := []struct {
		name    string
		advance time.Duration
		reopen  bool
		want    time.Duration // put_at after the put, from first
	}{
		{"again at once", 0, false, 0},
		{"just before a quarter of the grace", fresh - time.Second, false, 0},
		{"a quarter of the grace on", time.Second, false, fresh},
		{"soon after", time.Minute, false, fresh},
		{"after a restart", time.Minute, true, fresh + 2*time.Minute},
	}
	for _, st := range steps {
		clock.Add(st.advance)
		if st.reopen {
			s.reopen()
		}
		s.put(acme, data)
		if got, want := putAt(), first.Add(st.want); !got.Equal(want) {
			t.Errorf("%s: put_at %v, want %v", st.name, got, want)
		}
	}
}

// A release over several batches, with the payloads of the tenant's
// turns asked about a window of queued blobs at once, keeps the claims to
// the payloads a live turn still names, including one appended while a
// batch was being worked out (what was read of the turns is read again).
func TestReleaseAcrossBatchesKeepsLivePayloads(t *testing.T) {
	for _, window := range []int{4, 100} {
		t.Run(fmt.Sprintf("window=%d", window), func(t *testing.T) { testReleaseAcrossBatches(t, window) })
	}
}

func testReleaseAcrossBatches(t *testing.T, window int) {
	t.Helper()
	oldBatch, oldWindow := claimReviewBatch, claimPayloadWindow
	claimReviewBatch, claimPayloadWindow = 2, window
	t.Cleanup(func() { claimReviewBatch, claimPayloadWindow = oldBatch, oldWindow })
	clock := testkit.NewClock(time.Now())
	s := &testStore{t: t, dir: t.TempDir(), pool: pgtest.NewPool(t), now: clock.Now}
	var (
		once     sync.Once
		live     Head
		acme     ident.Tenant
		late     []byte
		hookErrs = make(chan error, 1)
	)
	s.beforeRelease = func() {
		once.Do(func() {
			_, err := s.Append(context.Background(), acme, turnReq(live.ContextID, 0, late))
			hookErrs <- err
		})
	}
	s.open(nil)
	acme = s.tenant("acme")
	dead := s.create(acme, 0)
	live = s.create(acme, 0)
	var payloads [][]byte
	for i := range 9 {
		p := payloadN(3000 + i)
		payloads = append(payloads, p)
		s.append(acme, turnReq(dead.ContextID, 0, p))
	}
	s.append(acme, turnReq(live.ContextID, 0, payloads[2]))
	s.append(acme, turnReq(live.ContextID, 0, payloads[7]))
	late = payloads[5]
	clock.Add(DefaultBlobClaimGrace + time.Minute)
	s.deleteContext(acme, dead.ContextID)
	s.reap()
	if err := <-hookErrs; err != nil {
		t.Fatalf("append while the release was worked out: %v", err)
	}
	want := map[ident.Hash]bool{}
	for i, p := range payloads {
		want[blake3.Sum256(p)] = i == 2 || i == 5 || i == 7
	}
	s.wantBlobs(acme, want)
	if n := s.countRows("released_blob_claims"); n != 6 {
		t.Errorf("%d claims released, want 6", n)
	}
	if n := s.countRows("blob_claim_reviews"); n != 0 {
		t.Errorf("%d reviews left", n)
	}
}
