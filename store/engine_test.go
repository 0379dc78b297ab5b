package store

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/store/internal/groupcommit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testStore is an engine on a fresh database and directory that a test can
// reopen to check what survives.
type testStore struct {
	t           *testing.T
	dir         string
	pool        *pgxpool.Pool
	maxIdemKeys int              // Options.MaxIdempotencyKeys at the next open
	quota       QuotaFunc        // Options.Quota at the next open
	now         func() time.Time // Options.Now at the next open
	// beforeRelease is Options.beforeRelease at the next open.
	beforeRelease func()
	// afterMarkDeleted is Options.afterMarkDeleted at the next open.
	afterMarkDeleted func()
	// appended receives what Options.OnAppend is handed, when not nil,
	// with payloads up to onAppendPayloads bytes.
	appended         chan []Appended
	onAppendPayloads int
	*Engine
}

func newTestStore(t *testing.T) *testStore {
	t.Helper()
	s := &testStore{t: t, dir: t.TempDir(), pool: pgtest.NewPool(t)}
	s.open(nil)
	return s
}

func (s *testStore) open(h *groupcommit.Hooks) {
	s.t.Helper()
	opts := Options{Dir: s.dir, Pool: s.pool, FSTree: decodeFSTree, hooks: h, MaxIdempotencyKeys: s.maxIdemKeys, Quota: s.quota, Now: s.now, beforeRelease: s.beforeRelease,
		afterMarkDeleted: s.afterMarkDeleted}
	if s.appended != nil {
		opts.OnAppend, opts.OnAppendPayloads = func(a []Appended) { s.appended <- a }, s.onAppendPayloads
	}
	e, err := Open(context.Background(), opts)
	if err != nil {
		s.t.Fatalf("open store: %v", err)
	}
	s.Engine = e
	s.t.Cleanup(func() { e.Close() })
}

// reopen closes the engine and opens the same directory and database.
func (s *testStore) reopen() {
	s.t.Helper()
	if err := s.Engine.Close(); err != nil {
		s.t.Fatalf("close: %v", err)
	}
	s.open(nil)
}

// newListenedStore is a testStore whose OnAppend calls nextAppended
// returns, handed payloads up to payloads bytes.
func newListenedStore(t *testing.T, payloads int) *testStore {
	t.Helper()
	s := &testStore{t: t, dir: t.TempDir(), pool: pgtest.NewPool(t), appended: make(chan []Appended, 16), onAppendPayloads: payloads}
	s.open(nil)
	return s
}

// nextAppended is what the next OnAppend call was handed.
func (s *testStore) nextAppended() []Appended {
	s.t.Helper()
	select {
	case a := <-s.appended:
		return a
	case <-time.After(10 * time.Second):
		s.t.Fatal("OnAppend was not called")
		return nil
	}
}

func (s *testStore) tenant(id string) ident.Tenant {
	s.t.Helper()
	if _, err := s.pool.Exec(context.Background(), `INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING`, id); err != nil {
		s.t.Fatal(err)
	}
	t, err := s.Tenant(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return t
}

func (s *testStore) defaultTenant() ident.Tenant { return s.tenant(ident.DefaultTenantID) }

func (s *testStore) create(t ident.Tenant, base uint64) Head {
	s.t.Helper()
	h, err := s.CreateContext(context.Background(), t, base, "")
	if err != nil {
		s.t.Fatalf("create context: %v", err)
	}
	return h
}

func (s *testStore) append(t ident.Tenant, req *AppendRequest) AppendResult {
	s.t.Helper()
	r, err := s.Append(context.Background(), t, req)
	if err != nil {
		s.t.Fatalf("append: %v", err)
	}
	return r
}

func (s *testStore) last(t ident.Tenant, ctx uint64, n uint32, payload bool) []Turn {
	s.t.Helper()
	turns, err := s.Last(context.Background(), t, ctx, n, payload)
	if err != nil {
		s.t.Fatalf("last: %v", err)
	}
	return turns
}

func (s *testStore) countRows(table string) int {
	s.t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// turnReq builds an uncompressed append of payload.
func turnReq(ctxID, parent uint64, payload []byte) *AppendRequest {
	return &AppendRequest{
		ContextID: ctxID, ParentTurnID: parent, TypeID: "cxdb.ConversationItem", TypeVersion: 3,
		Encoding: 1, UncompressedLen: uint32(len(payload)), ContentHash: blake3.Sum256(payload), Payload: payload,
	}
}

func payloadN(i int) []byte {
	return []byte(fmt.Sprintf("payload %d %s", i, bytes.Repeat([]byte("x"), i%300)))
}

func wantKind(t *testing.T, err error, kind fault.Kind) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", kind)
	}
	if fault.KindOf(err) != kind {
		t.Fatalf("got %v (%v), want %v", fault.KindOf(err), err, kind)
	}
}

func TestAppendBuildsALinearChain(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	if h.TurnID != 0 || h.Depth != 0 {
		t.Fatalf("empty context head = %+v", h)
	}
	var ids []uint64
	for i := 1; i <= 3; i++ {
		r := s.append(ten, turnReq(h.ContextID, 0, payloadN(i)))
		if r.Depth != uint32(i) {
			t.Fatalf("turn %d depth = %d, want %d (the first turn has depth 1)", i, r.Depth, i)
		}
		ids = append(ids, r.TurnID)
	}
	head, err := s.Head(context.Background(), ten, h.ContextID)
	if err != nil || head.TurnID != ids[2] || head.Depth != 3 {
		t.Fatalf("head = %+v, %v", head, err)
	}
	got := s.last(ten, h.ContextID, 2, true)
	if len(got) != 2 || got[0].ID != ids[1] || got[1].ID != ids[2] {
		t.Fatalf("last 2 = %+v", got)
	}
	if got[0].ParentID != ids[0] || !bytes.Equal(got[1].Payload, payloadN(3)) || got[1].TypeID != "cxdb.ConversationItem" {
		t.Fatalf("turn fields wrong: %+v", got[1])
	}
	if meta := s.last(ten, h.ContextID, 10, false); len(meta) != 3 || meta[0].Payload != nil {
		t.Fatalf("metadata-only last = %+v", meta)
	}
	if n := s.countRows("turns"); n != 3 {
		t.Fatalf("turn rows = %d", n)
	}
}

func TestForkSharesHistory(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	main := s.create(ten, 0)
	a := s.append(ten, turnReq(main.ContextID, 0, []byte("a")))
	b := s.append(ten, turnReq(main.ContextID, 0, []byte("b")))
	s.append(ten, turnReq(main.ContextID, 0, []byte("c")))

	fork := s.create(ten, b.TurnID)
	if fork.TurnID != b.TurnID || fork.Depth != 2 {
		t.Fatalf("fork head = %+v", fork)
	}
	d := s.append(ten, turnReq(fork.ContextID, 0, []byte("d")))
	if d.Depth != 3 {
		t.Fatalf("fork append depth = %d", d.Depth)
	}
	got := s.last(ten, fork.ContextID, 10, true)
	want := []string{"a", "b", "d"}
	if len(got) != len(want) {
		t.Fatalf("fork history = %d turns", len(got))
	}
	for i, w := range want {
		if string(got[i].Payload) != w {
			t.Fatalf("fork turn %d = %q, want %q", i, got[i].Payload, w)
		}
	}
	// An explicit parent branches in place.
	e := s.append(ten, turnReq(main.ContextID, a.TurnID, []byte("e")))
	if e.Depth != 2 {
		t.Fatalf("branch depth = %d", e.Depth)
	}
}

func TestAppendRejectsBadInputAndStoresNothing(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	good := func() *AppendRequest { return turnReq(h.ContextID, 0, []byte("hello")) }
	missing := ident.Hash{0xBB}
	tests := []struct {
		name   string
		mutate func(*AppendRequest)
		want   fault.Kind
	}{
		{"unknown context", func(r *AppendRequest) { r.ContextID = 9999 }, fault.NotFound},
		{"unknown parent", func(r *AppendRequest) { r.ParentTurnID = 12345 }, fault.NotFound},
		{"hash mismatch", func(r *AppendRequest) { r.ContentHash[0] ^= 1 }, fault.Conflict},
		{"length mismatch", func(r *AppendRequest) { r.UncompressedLen++ }, fault.Conflict},
		{"unsupported compression", func(r *AppendRequest) { r.Compression = 7 }, fault.Unprocessable},
		{"unknown encoding", func(r *AppendRequest) { r.Encoding = 7 }, fault.Invalid},
		{"no encoding", func(r *AppendRequest) { r.Encoding = 0 }, fault.Invalid},
		{"bad zstd", func(r *AppendRequest) { r.Compression = CompressionZstd }, fault.Unprocessable},
		{"zstd too large", func(r *AppendRequest) { r.Compression, r.UncompressedLen = CompressionZstd, MaxPayload+1 }, fault.Unprocessable},
		{"missing fs root", func(r *AppendRequest) { r.FSRoot = &missing }, fault.NotFound},
		{"type id too long", func(r *AppendRequest) { r.TypeID = strings.Repeat("t", MaxTypeIDLen+1) }, fault.Unprocessable},
		{"type id with NUL", func(r *AppendRequest) { r.TypeID = "a\x00b" }, fault.Unprocessable},
		{"type id not UTF-8", func(r *AppendRequest) { r.TypeID = "\xff" }, fault.Invalid},
		{"key too long", func(r *AppendRequest) { r.IdempotencyKey = make([]byte, MaxIdempotencyKeyLen+1) }, fault.Unprocessable},
		{"payload too large", func(r *AppendRequest) { r.UncompressedLen = MaxPayload + 1 }, fault.Unprocessable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := good()
			tt.mutate(req)
			_, err := s.Append(context.Background(), ten, req)
			wantKind(t, err, tt.want)
		})
	}
	if n := s.countRows("turns"); n != 0 {
		t.Fatalf("rejected appends stored %d turns", n)
	}
	if st := s.Stats(); st.LogBytes != 0 || st.LastTurn != 0 {
		t.Fatalf("rejected appends wrote files: %+v", st)
	}
}

func TestZstdPayloadIsVerifiedAndServedDecompressed(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	raw := bytes.Repeat([]byte("compress me "), 100)
	enc, _ := zstd.NewWriter(nil)
	req := turnReq(h.ContextID, 0, raw)
	req.Compression, req.Payload = CompressionZstd, enc.EncodeAll(raw, nil)
	s.append(ten, req)
	got := s.last(ten, h.ContextID, 1, true)
	if !bytes.Equal(got[0].Payload, raw) || got[0].Compression != 0 || got[0].UncompressedLen != uint32(len(raw)) {
		t.Fatalf("zstd turn served as %+v", got[0])
	}
	meta := s.last(ten, h.ContextID, 1, false)
	if meta[0].Compression != CompressionZstd {
		t.Fatalf("metadata view lost the wire compression: %+v", meta[0])
	}
}

func TestIdempotencyKeyReturnsTheOriginalTurn(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	other := s.create(ten, 0)
	req := turnReq(h.ContextID, 0, []byte("once"))
	req.IdempotencyKey = []byte("idem-1")
	first := s.append(ten, req)
	again := s.append(ten, req)
	if again.TurnID != first.TurnID || !again.Replayed {
		t.Fatalf("replay = %+v, first = %+v", again, first)
	}
	otherReq := turnReq(other.ContextID, 0, []byte("once"))
	otherReq.IdempotencyKey = []byte("idem-1")
	if r := s.append(ten, otherReq); r.TurnID == first.TurnID {
		t.Fatal("a key is scoped to its context")
	}
	s.reopen()
	if r := s.append(ten, req); r.TurnID != first.TurnID {
		t.Fatalf("after reopen the key appended turn %d", r.TurnID)
	}
	if n := s.countRows("turns"); n != 2 {
		t.Fatalf("turn rows = %d, want 2", n)
	}
}

func TestIdempotencyKeyWithinOneGroup(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	req := turnReq(h.ContextID, 0, []byte("dup"))
	req.IdempotencyKey = []byte("k")
	results := make(chan AppendResult, 8)
	for range 8 {
		go func() {
			r, err := s.Append(context.Background(), ten, req)
			if err != nil {
				t.Error(err)
			}
			results <- r
		}()
	}
	first := <-results
	for range 7 {
		if r := <-results; r.TurnID != first.TurnID {
			t.Fatalf("same key produced turns %d and %d", first.TurnID, r.TurnID)
		}
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	s := newTestStore(t)
	a, b := s.tenant("acme"), s.tenant("bravo")
	ctx := context.Background()
	ha := s.create(a, 0)
	ra := s.append(a, turnReq(ha.ContextID, 0, []byte("secret")))

	_, err := s.Head(ctx, b, ha.ContextID)
	wantKind(t, err, fault.NotFound)
	_, err = s.Append(ctx, b, turnReq(ha.ContextID, 0, []byte("x")))
	wantKind(t, err, fault.NotFound)
	_, err = s.CreateContext(ctx, b, ra.TurnID, "")
	wantKind(t, err, fault.NotFound)
	_, err = s.GetBlob(ctx, b, ra.ContentHash)
	wantKind(t, err, fault.NotFound)
	err = s.AttachFS(ctx, b, ra.TurnID, ra.ContentHash)
	wantKind(t, err, fault.NotFound)
	hb := s.create(b, 0)
	_, err = s.Append(ctx, b, turnReq(hb.ContextID, ra.TurnID, []byte("x")))
	wantKind(t, err, fault.NotFound)

	// b storing the same bytes gets its own grant to them.
	isNew, err := s.PutBlob(ctx, b, ra.ContentHash, []byte("secret"))
	if err != nil || !isNew {
		t.Fatalf("b's first put: new=%v err=%v", isNew, err)
	}
	if got, err := s.GetBlob(ctx, b, ra.ContentHash); err != nil || string(got) != "secret" {
		t.Fatalf("b's own blob: %q %v", got, err)
	}
	if isNew, _ := s.PutBlob(ctx, b, ra.ContentHash, []byte("secret")); isNew {
		t.Fatal("b's second put reported new")
	}
}

// TestTenantsResolvedElsewhereCanWrite: hosted mode's API keys carry their
// tenant from their own lookup, so a tenant created while the engine runs
// reaches Append and PutBlob without Engine.Tenant; its writes commit.
func TestTenantsResolvedElsewhereCanWrite(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	var no int64
	if err := s.pool.QueryRow(ctx, `INSERT INTO tenants (tenant_id) VALUES ('late') RETURNING tenant_no`).Scan(&no); err != nil {
		t.Fatal(err)
	}
	late := ident.Tenant{ID: "late", No: uint32(no)}
	h := s.create(late, 0)
	r := s.append(late, turnReq(h.ContextID, 0, []byte("late turn")))
	if _, err := s.PutBlob(ctx, late, blake3.Sum256([]byte("late blob")), []byte("late blob")); err != nil {
		t.Fatalf("put blob: %v", err)
	}
	if n := s.countRows(`turns WHERE tenant_id = 'late'`); n != 1 {
		t.Fatalf("%d turns of the late tenant, want 1", n)
	}
	s.reopen()
	if got := s.last(late, h.ContextID, 10, true); len(got) != 1 || got[0].ID != r.TurnID {
		t.Fatalf("after reopen: %+v", got)
	}
}

func TestBlobsAndFSAttachments(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	ctx := context.Background()
	data := []byte("hello blob")
	h := blake3.Sum256(data)
	if isNew, err := s.PutBlob(ctx, ten, h, data); err != nil || !isNew {
		t.Fatalf("put: %v %v", isNew, err)
	}
	if isNew, err := s.PutBlob(ctx, ten, h, data); err != nil || isNew {
		t.Fatalf("second put: %v %v", isNew, err)
	}
	_, err := s.PutBlob(ctx, ten, ident.Hash{1}, data)
	wantKind(t, err, fault.Conflict)
	_, err = s.GetBlob(ctx, ten, ident.Hash{2})
	wantKind(t, err, fault.NotFound)

	tree := fstree.Encode([]fstree.Entry{{Name: "hello.txt", Size: uint64(len(data)), Hash: h, HashOK: true}})
	root := blake3.Sum256(tree)
	if _, err := s.PutBlob(ctx, ten, root, tree); err != nil {
		t.Fatal(err)
	}
	c := s.create(ten, 0)
	req := turnReq(c.ContextID, 0, []byte("with fs"))
	req.FSRoot = &root
	r := s.append(ten, req)
	if err := s.AttachFS(ctx, ten, r.TurnID, root); err != nil {
		t.Fatal(err)
	}
	wantKind(t, s.AttachFS(ctx, ten, 999, root), fault.NotFound)
	wantKind(t, s.AttachFS(ctx, ten, r.TurnID, ident.Hash{3}), fault.NotFound)
	if n := s.countRows("fs_attachments"); n != 1 {
		t.Fatalf("fs attachments = %d", n)
	}
	s.reopen()
	if got, err := s.GetBlob(ctx, ten, h); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("blob after reopen: %q %v", got, err)
	}
}

// An fs root must be whole: every tree object and file it reaches is
// stored for the tenant, else 404 naming the first missing blob, and
// nothing is attached or appended.
func TestFSRootsMustBeWhole(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	ctx := context.Background()
	put := func(b []byte) ident.Hash {
		h := blake3.Sum256(b)
		if _, err := s.PutBlob(ctx, ten, h, b); err != nil {
			t.Fatal(err)
		}
		return h
	}
	file := put([]byte("package main\n"))
	missing := blake3.Sum256([]byte("never stored"))
	entry := func(name string, kind int, h ident.Hash) fstree.Entry {
		return fstree.Entry{Name: name, Kind: kind, Hash: h, HashOK: true}
	}
	whole := put(fstree.Encode([]fstree.Entry{entry("main.go", fstree.KindFile, file), entry("src", fstree.KindDir, put(fstree.Encode(nil)))}))
	missingFile := put(fstree.Encode([]fstree.Entry{entry("gone.go", fstree.KindFile, missing)}))
	sub := put(fstree.Encode([]fstree.Entry{entry("link", fstree.KindSymlink, missing)}))
	missingDeep := put(fstree.Encode([]fstree.Entry{entry("a", fstree.KindDir, sub)}))
	missingTree := put(fstree.Encode([]fstree.Entry{entry("b", fstree.KindDir, missing)}))
	c := s.create(ten, 0)
	r := s.append(ten, turnReq(c.ContextID, 0, []byte("base")))
	if err := s.AttachFS(ctx, ten, r.TurnID, whole); err != nil {
		t.Fatalf("a whole tree: %v", err)
	}
	for _, tt := range []struct {
		name string
		root ident.Hash
		path string
	}{
		{"missing file", missingFile, "/gone.go"},
		{"missing symlink target deep down", missingDeep, "/a/link"},
		{"missing subtree", missingTree, "/b/"},
		{"missing root", missing, "/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := s.AttachFS(ctx, ten, r.TurnID, tt.root)
			wantKind(t, err, fault.NotFound)
			if !strings.Contains(err.Error(), fmt.Sprintf("%x", missing)) || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("error %q does not name blob %x at %s", err, missing, tt.path)
			}
			req := turnReq(c.ContextID, 0, []byte(tt.name))
			req.FSRoot = &tt.root
			_, err = s.Append(ctx, ten, req)
			wantKind(t, err, fault.NotFound)
		})
	}
	if n := s.countRows("fs_attachments"); n != 1 {
		t.Fatalf("fs attachments = %d, want only the whole one", n)
	}
	if n := s.countRows("turns"); n != 1 {
		t.Fatalf("turns = %d: an append with a broken fs root was stored", n)
	}
}

func TestBeforePagesOneContext(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	ctx := context.Background()
	h := s.create(ten, 0)
	var ids []uint64
	for i := range 10 {
		ids = append(ids, s.append(ten, turnReq(h.ContextID, 0, payloadN(i))).TurnID)
	}
	page, err := s.Before(ctx, ten, h.ContextID, ids[5], 3, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 3 || page[0].ID != ids[2] || page[2].ID != ids[4] {
		t.Fatalf("page = %v", page)
	}
	page, _ = s.Before(ctx, ten, h.ContextID, ids[1], 5, false)
	if len(page) != 1 || page[0].ID != ids[0] {
		t.Fatalf("first page = %v", page)
	}
	other := s.create(ten, 0)
	o := s.append(ten, turnReq(other.ContextID, 0, []byte("other")))
	_, err = s.Before(ctx, ten, h.ContextID, o.TurnID, 3, false)
	wantKind(t, err, fault.NotFound)
	// A fork may page through the turns it shares.
	fork := s.create(ten, ids[9])
	if page, err := s.Before(ctx, ten, fork.ContextID, ids[9], 2, false); err != nil || len(page) != 2 {
		t.Fatalf("fork page = %v, %v", page, err)
	}
}

func TestConcurrentAppendsToOneContextStayLinear(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	const writers, each = 8, 40
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				_, err := s.Append(context.Background(), ten, turnReq(h.ContextID, 0, payloadN(w*1000+i)))
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := s.last(ten, h.ContextID, writers*each+10, false)
	if len(got) != writers*each {
		t.Fatalf("chain has %d turns, want %d", len(got), writers*each)
	}
	for i, turn := range got {
		if turn.Depth != uint32(i+1) {
			t.Fatalf("turn %d has depth %d", i, turn.Depth)
		}
	}
}

func TestEverythingSurvivesReopen(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	var want []AppendResult
	for i := range 50 {
		want = append(want, s.append(ten, turnReq(h.ContextID, 0, payloadN(i))))
	}
	s.reopen()
	got := s.last(ten, h.ContextID, 100, true)
	if len(got) != len(want) {
		t.Fatalf("after reopen: %d turns, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].ID != w.TurnID || got[i].Depth != w.Depth || !bytes.Equal(got[i].Payload, payloadN(i)) {
			t.Fatalf("turn %d after reopen = %+v, want %+v", i, got[i], w)
		}
	}
	next := s.append(ten, turnReq(h.ContextID, 0, []byte("next")))
	if next.TurnID <= want[len(want)-1].TurnID || next.Depth != 51 {
		t.Fatalf("append after reopen = %+v", next)
	}
}

// An answer keeps the newest turns that fit maxListBytes, so it always
// fits a protocol frame.
func TestLastStopsAtTheByteBudget(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	const size = 20 << 20 // three of these exceed the 48 MiB budget
	var ids []uint64
	for i := range 3 {
		payload := bytes.Repeat([]byte{byte('a' + i)}, size)
		ids = append(ids, s.append(ten, turnReq(h.ContextID, 0, payload)).TurnID)
	}
	got := s.last(ten, h.ContextID, 10, true)
	if len(got) != 2 || got[0].ID != ids[1] || got[1].ID != ids[2] || len(got[1].Payload) != size {
		t.Fatalf("got %d turns, want the newest 2 of 3", len(got))
	}
	if meta := s.last(ten, h.ContextID, 10, false); len(meta) != 3 {
		t.Fatalf("without payloads: %d turns, want 3", len(meta))
	}
}

// Small payloads are compressed by the pack in the group's write, large
// ones by the appending goroutine; both are stored compressed and read
// back whole.
func TestPayloadsAreStoredCompressedWhereverCompressed(t *testing.T) {
	for _, size := range []int{1 << 10, packCompressMax, packCompressMax + 1, 64 << 10} {
		s := newTestStore(t)
		ten := s.defaultTenant()
		h := s.create(ten, 0)
		payload := bytes.Repeat([]byte("a turn of conversation "), size/23+1)[:size]
		s.append(ten, turnReq(h.ContextID, 0, payload))
		if st := s.blobs.Stats(); st.PackBytes >= int64(size) {
			t.Errorf("%d bytes: pack holds %d bytes, want it compressed", size, st.PackBytes)
		}
		if got := s.last(ten, h.ContextID, 1, true); len(got) != 1 || !bytes.Equal(got[0].Payload, payload) {
			t.Errorf("%d bytes: payload does not read back", size)
		}
	}
}

// OnAppend is handed a copy of each committed payload up to
// OnAppendPayloads bytes, made before the append is answered: the
// request's buffer may be reused once it is.
func TestOnAppendPayloads(t *testing.T) {
	s := newListenedStore(t, 8)
	tenant := s.defaultTenant()
	h := s.create(tenant, 0)
	for _, tc := range []struct {
		payload string
		want    []byte
	}{
		{"\xa5short", []byte("\xa5short")},
		{"\xa8too long", nil},
	} {
		req := turnReq(h.ContextID, 0, []byte(tc.payload))
		s.append(tenant, req)
		clear(req.Payload) // as a connection reusing its frame buffer
		a := s.nextAppended()
		if len(a) != 1 || !bytes.Equal(a[0].Payload, tc.want) || (tc.want == nil) != (a[0].Payload == nil) {
			t.Errorf("%q: OnAppend got %+v, want payload %q", tc.payload, a, tc.want)
		}
	}
}

// OnAppend describes each turn as its Postgres row has it: the analytics
// projector counts by these fields without reading the row back.
func TestOnAppendDescribesTheRow(t *testing.T) {
	s := newListenedStore(t, 0)
	tenant := s.defaultTenant()
	h := s.create(tenant, 0)
	for _, key := range []string{"", "k1"} {
		req := turnReq(h.ContextID, 0, []byte("\xa5hello"))
		req.IdempotencyKey = []byte(key)
		s.append(tenant, req)
		a := s.nextAppended()
		if len(a) != 1 {
			t.Fatalf("OnAppend got %d turns, want 1", len(a))
		}
		var row Appended
		var created time.Time
		err := s.pool.QueryRow(context.Background(), `SELECT context_id, parent_turn_id, uncompressed_len, created_at, idempotency_key IS NOT NULL
			FROM turns WHERE tenant_id = $1 AND turn_id = $2`, tenant.ID, a[0].TurnID).
			Scan(&row.ContextID, &row.ParentID, &row.UncompressedLen, &created, &row.Keyed)
		if err != nil {
			t.Fatal(err)
		}
		// The unkeyed group goes through CommitPlainAppends, the keyed one
		// through CommitKeyedAppends: both move the head.
		var head int64
		err = s.pool.QueryRow(context.Background(), `SELECT head_turn_id FROM contexts WHERE tenant_id = $1 AND context_id = $2`,
			tenant.ID, h.ContextID).Scan(&head)
		if err != nil || uint64(head) != a[0].TurnID {
			t.Errorf("key %q: head %d, want %d (%v)", key, head, a[0].TurnID, err)
		}
		g := a[0]
		if g.ContextID != row.ContextID || g.ParentID != row.ParentID || g.UncompressedLen != row.UncompressedLen ||
			g.Keyed != row.Keyed || !g.CreatedAt.Truncate(time.Microsecond).Equal(created) {
			t.Errorf("key %q: OnAppend %+v, the row: context %d parent %d len %d keyed %v created %v",
				key, g, row.ContextID, row.ParentID, row.UncompressedLen, row.Keyed, created)
		}
	}
}

// Stats times the steps of each group commit: an append adds to each.
func TestStatsTimeGroupSteps(t *testing.T) {
	s := newTestStore(t)
	tenant := s.defaultTenant()
	h := s.create(tenant, 0)
	before := s.Stats()
	s.append(tenant, turnReq(h.ContextID, 0, []byte("\xa5hello")))
	after := s.Stats()
	if after.FilesTime <= before.FilesTime || after.StatementTime <= before.StatementTime || after.CommitTime <= before.CommitTime {
		t.Errorf("step times did not grow: before %+v, after %+v", before, after)
	}
}

// A zstd frame that inflates past its declared length (a bomb) is refused
// as a length mismatch after decoding about what it declared: its cost
// follows the declared length, not the payload limit.
func TestZstdBombCostsWhatItDeclared(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithZeroFrames(true))
	zeros := make([]byte, 32<<20)
	for _, tt := range []struct {
		name  string
		frame []byte
	}{
		{"frame with its content size", enc.EncodeAll(zeros, nil)},
		{"streamed frame without one", streamedZstd(t, zeros)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := turnReq(h.ContextID, 0, []byte("hello"))
			req.Compression, req.Payload, req.UncompressedLen = CompressionZstd, tt.frame, 100
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := s.Append(context.Background(), ten, req)
			runtime.ReadMemStats(&after)
			wantKind(t, err, fault.Conflict)
			// A decoder's block buffers and the store's own work are well
			// below this; the whole frame inflated is 32 MiB.
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
				t.Errorf("a %d-byte bomb declaring 100 bytes allocated %d MiB", len(tt.frame), grew>>20)
			}
		})
	}
}

// streamedZstd compresses b as a stream, whose frame does not declare its
// content size.
func streamedZstd(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
