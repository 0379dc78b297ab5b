// Package contract is the one test suite of the SDK's three contracts.
// It runs against any sdk.Store (the fake, a Client on a real cardboxd),
// checks the semantics each contract promises, and records a transcript
// in which ids are replaced by the order they first appeared in, so that
// two implementations can be compared for the same shapes and semantics
// whatever ids they hand out.
package contract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/sdk"
	"github.com/cardboxhq/cardbox/sdk/fstree"
)

// Transcript is what a run observed, ids normalised.
type Transcript struct {
	lines []string
	ids   map[string]string
	n     map[byte]int
}

// String is the transcript, one observation a line.
func (tr *Transcript) String() string { return strings.Join(tr.lines, "\n") }

// id maps a real id to its symbolic name: C1, C2 ... for contexts, T1 ...
// for turns; "" stays "-".
func (tr *Transcript) id(kind byte, v string) string {
	if v == "" {
		return "-"
	}
	k := string(kind) + v
	if s, ok := tr.ids[k]; ok {
		return s
	}
	tr.n[kind]++
	s := fmt.Sprintf("%c%d", kind, tr.n[kind])
	tr.ids[k] = s
	return s
}

func (tr *Transcript) add(format string, args ...any) {
	tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
}

func (tr *Transcript) head(h sdk.ContextHead) string {
	return fmt.Sprintf("%s head=%s depth=%d", tr.id('C', string(h.ContextID)), tr.id('T', string(h.HeadTurnID)), h.HeadDepth)
}

func (tr *Transcript) turn(t sdk.StoredTurn) string {
	s := fmt.Sprintf("%s %s parent=%s depth=%d type=%s/%d", tr.id('C', string(t.ContextID)), tr.id('T', string(t.TurnID)),
		tr.id('T', string(t.ParentTurnID)), t.Depth, t.TypeID, t.TypeVersion)
	if t.Payload != nil {
		s += fmt.Sprintf(" payload=%q", t.Payload)
	}
	return s
}

func (tr *Transcript) turns(ts []sdk.StoredTurn) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = "[" + tr.turn(t) + "]"
	}
	return strings.Join(parts, " ")
}

// errKind names an error by the sentinel it matches.
func errKind(err error) string {
	for _, k := range []struct {
		err  error
		name string
	}{{sdk.ErrNotFound, "NotFound"}, {sdk.ErrHeadMoved, "HeadMoved"}, {sdk.ErrConflict, "Conflict"}, {sdk.ErrInvalid, "Invalid"}, {sdk.ErrUnauthorized, "Unauthorized"}} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	if err == nil {
		return "ok"
	}
	return "other: " + err.Error()
}

// Run runs the suite on s (fresh: no contexts made by others matter, but
// bundle ids are unique per run) and returns its transcript.
func Run(t *testing.T, s sdk.Store) *Transcript {
	t.Helper()
	tr := &Transcript{ids: map[string]string{}, n: map[byte]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := &checker{t: t, s: s, ctx: ctx, tr: tr}
	for _, step := range []struct {
		name string
		f    func()
	}{
		{"chain", c.chain},
		{"fork", c.fork},
		{"explicit parent", c.explicitParent},
		{"idempotency", c.idempotency},
		{"conditional", c.conditional},
		{"errors", c.errors},
		{"paging", c.paging},
		{"bundles", c.bundles},
		{"blobs", c.blobs},
		{"fs", c.fs},
	} {
		tr.add("# %s", step.name)
		t.Run(step.name, func(t *testing.T) {
			c.t = t
			step.f()
		})
	}
	return tr
}

type checker struct {
	t   *testing.T
	s   sdk.Store
	ctx context.Context
	tr  *Transcript
	// chainCtx and chainTurns are the context and turns of the chain step,
	// which later steps build on.
	chainCtx   sdk.ContextID
	chainTurns []sdk.StoredTurn
}

func (c *checker) must(err error, what string) {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

func (c *checker) create() sdk.ContextHead {
	c.t.Helper()
	h, err := c.s.CreateContext(c.ctx, "")
	c.must(err, "create context")
	c.tr.add("create: %s", c.tr.head(h))
	if h.HeadTurnID != "" || h.HeadDepth != 0 {
		c.t.Fatalf("new empty context has head %q depth %d", h.HeadTurnID, h.HeadDepth)
	}
	return h
}

func (c *checker) append(req sdk.AppendRequest) sdk.StoredTurn {
	c.t.Helper()
	if req.TypeID == "" {
		req.TypeID, req.TypeVersion = "test.Event", 1
	}
	got, err := c.s.AppendTurn(c.ctx, req)
	c.must(err, "append")
	c.tr.add("append %s: %s", req.IdempotencyKey, c.tr.turn(got))
	if got.ContentHash != sdk.HashOf(req.Payload) {
		c.t.Fatalf("content hash %s, want %s", got.ContentHash, sdk.HashOf(req.Payload))
	}
	return got
}

func (c *checker) chain() {
	h := c.create()
	var prev sdk.StoredTurn
	for i := 1; i <= 3; i++ {
		t := c.append(sdk.AppendRequest{ContextID: h.ContextID, Payload: fmt.Appendf(nil, "p%d", i), IdempotencyKey: sdk.Key(uint64(i), "chain")})
		if t.Depth != uint32(i) || t.ParentTurnID != prev.TurnID || t.ContextID != h.ContextID {
			c.t.Fatalf("turn %d: depth %d parent %q, want %d and %q", i, t.Depth, t.ParentTurnID, i, prev.TurnID)
		}
		prev = t
		c.chainTurns = append(c.chainTurns, t)
	}
	c.chainCtx = h.ContextID
	got, err := c.s.Head(c.ctx, h.ContextID)
	c.must(err, "head")
	c.tr.add("head: %s", c.tr.head(got))
	if got.HeadTurnID != prev.TurnID || got.HeadDepth != 3 {
		c.t.Fatalf("head %+v, want turn %s depth 3", got, prev.TurnID)
	}
	last, err := c.s.Last(c.ctx, h.ContextID, 2, true)
	c.must(err, "last")
	c.tr.add("last 2: %s", c.tr.turns(last))
	if len(last) != 2 || last[0].TurnID != c.chainTurns[1].TurnID || !bytes.Equal(last[1].Payload, []byte("p3")) {
		c.t.Fatalf("last 2: %+v", last)
	}
	meta, err := c.s.Last(c.ctx, h.ContextID, 10, false)
	c.must(err, "last without payload")
	c.tr.add("last 10 no payload: %s", c.tr.turns(meta))
	if len(meta) != 3 || meta[0].Payload != nil || meta[0].ParentTurnID != "" {
		c.t.Fatalf("last without payload: %+v", meta)
	}
}

func (c *checker) fork() {
	base := c.chainTurns[1]
	h, err := c.s.ForkContext(c.ctx, base.TurnID)
	c.must(err, "fork")
	c.tr.add("fork from %s: %s", c.tr.id('T', string(base.TurnID)), c.tr.head(h))
	if h.HeadTurnID != base.TurnID || h.HeadDepth != base.Depth || h.ContextID == c.chainCtx {
		c.t.Fatalf("fork head %+v, want turn %s depth %d in a new context", h, base.TurnID, base.Depth)
	}
	t := c.append(sdk.AppendRequest{ContextID: h.ContextID, Payload: []byte("forked"), IdempotencyKey: "fork/1"})
	if t.ParentTurnID != base.TurnID || t.Depth != base.Depth+1 {
		c.t.Fatalf("first turn of the fork: %+v", t)
	}
	last, err := c.s.Last(c.ctx, h.ContextID, 10, true)
	c.must(err, "last of fork")
	c.tr.add("last of fork: %s", c.tr.turns(last))
	if len(last) != 3 || last[0].TurnID != c.chainTurns[0].TurnID {
		c.t.Fatalf("the fork's history does not reach into its base: %+v", last)
	}
	orig, err := c.s.Head(c.ctx, c.chainCtx)
	c.must(err, "head of the original")
	c.tr.add("original head: %s", c.tr.head(orig))
	if orig.HeadTurnID != c.chainTurns[2].TurnID {
		c.t.Fatalf("forking moved the original's head: %+v", orig)
	}
	empty, err := c.s.CreateContext(c.ctx, base.TurnID)
	c.must(err, "create on a base")
	c.tr.add("create on %s: %s", c.tr.id('T', string(base.TurnID)), c.tr.head(empty))
}

func (c *checker) explicitParent() {
	h := c.create()
	a := c.append(sdk.AppendRequest{ContextID: h.ContextID, Payload: []byte("a"), IdempotencyKey: "ep/1"})
	c.append(sdk.AppendRequest{ContextID: h.ContextID, Payload: []byte("b"), IdempotencyKey: "ep/2"})
	branch := c.append(sdk.AppendRequest{ContextID: h.ContextID, ParentTurnID: a.TurnID, Payload: []byte("c"), IdempotencyKey: "ep/3"})
	if branch.ParentTurnID != a.TurnID || branch.Depth != 2 {
		c.t.Fatalf("explicit parent: %+v", branch)
	}
	got, err := c.s.Head(c.ctx, h.ContextID)
	c.must(err, "head")
	c.tr.add("head after branching in place: %s", c.tr.head(got))
	if got.HeadTurnID != branch.TurnID {
		c.t.Fatalf("head %+v, want the branch turn %s", got, branch.TurnID)
	}
}

func (c *checker) idempotency() {
	h := c.create()
	req := sdk.AppendRequest{ContextID: h.ContextID, TypeID: "test.Event", TypeVersion: 1, Payload: []byte("once"), IdempotencyKey: sdk.AgentKey("s1", 1, "input")}
	first := c.append(req)
	again := c.append(req)
	if again.TurnID != first.TurnID || again.Depth != first.Depth || again.ParentTurnID != first.ParentTurnID {
		c.t.Fatalf("a repeat gave %+v, want the original %+v", again, first)
	}
	got, err := c.s.Last(c.ctx, h.ContextID, 10, false)
	c.must(err, "last")
	if len(got) != 1 {
		c.t.Fatalf("a repeat made %d turns", len(got))
	}
	other := req
	other.Payload = []byte("other")
	_, err = c.s.AppendTurn(c.ctx, other)
	c.tr.add("same key, other payload: %s", errKind(err))
	if !errors.Is(err, sdk.ErrConflict) {
		c.t.Fatalf("same key, other payload: %v, want ErrConflict", err)
	}
	h2 := c.create()
	req.ContextID = h2.ContextID
	c.append(req) // keys are per context
}

// conditional: an append with IfHead commits only on the head it names;
// a retry of one that committed returns its turn; racing ones on one
// head give one turn and ErrHeadMoved naming it.
func (c *checker) conditional() {
	h := c.create()
	first := c.append(sdk.AppendRequest{ContextID: h.ContextID, Payload: []byte("c1"), IdempotencyKey: "cond/1", IfHead: true})
	again := c.append(sdk.AppendRequest{ContextID: h.ContextID, Payload: []byte("c1"), IdempotencyKey: "cond/1", IfHead: true})
	if first.Depth != 1 || again.TurnID != first.TurnID {
		c.t.Fatalf("conditional append on an empty context: %+v, its retry %+v", first, again)
	}
	_, err := c.s.AppendTurn(c.ctx, sdk.AppendRequest{ContextID: h.ContextID, TypeID: "test.Event", TypeVersion: 1,
		Payload: []byte("late"), IdempotencyKey: "cond/late", IfHead: true})
	head, moved := sdk.HeadMovedTo(err)
	c.tr.add("conditional on the empty context, now taken: %s head=%s", errKind(err), c.tr.id('T', string(head)))
	if !errors.Is(err, sdk.ErrHeadMoved) || !errors.Is(err, sdk.ErrConflict) || !moved || head != first.TurnID {
		c.t.Fatalf("conditional append on a moved head: %v (head %q), want ErrHeadMoved naming %s", err, head, first.TurnID)
	}
	second := c.append(sdk.AppendRequest{ContextID: h.ContextID, ParentTurnID: first.TurnID, Payload: []byte("c2"), IdempotencyKey: "cond/2", IfHead: true})
	if second.ParentTurnID != first.TurnID || second.Depth != 2 {
		c.t.Fatalf("conditional append on the head: %+v", second)
	}
	const racers = 4
	errs := make(chan error, racers)
	for i := range racers {
		go func() {
			_, err := c.s.AppendTurn(c.ctx, sdk.AppendRequest{ContextID: h.ContextID, ParentTurnID: second.TurnID, TypeID: "test.Event",
				TypeVersion: 1, Payload: fmt.Appendf(nil, "racer %d", i), IdempotencyKey: sdk.Key(uint64(i), "cond-race"), IfHead: true})
			errs <- err
		}()
	}
	won, lost := 0, 0
	for range racers {
		switch err := <-errs; {
		case err == nil:
			won++
		case errors.Is(err, sdk.ErrHeadMoved):
			lost++
		default:
			c.t.Fatalf("racing conditional append: %v", err)
		}
	}
	c.tr.add("racing conditional appends: %d won, %d lost", won, lost)
	if won != 1 || lost != racers-1 {
		c.t.Fatalf("racing conditional appends on one head: %d won, %d lost", won, lost)
	}
}

func (c *checker) errors() {
	const nope = "999999999"
	validHash := sdk.HashOf([]byte("never stored in any test"))
	cases := []struct {
		name string
		err  func() error
		want error
	}{
		{"head of unknown context", func() error { _, err := c.s.Head(c.ctx, nope); return err }, sdk.ErrNotFound},
		{"last of unknown context", func() error { _, err := c.s.Last(c.ctx, nope, 1, false); return err }, sdk.ErrNotFound},
		{"append to unknown context", func() error {
			_, err := c.s.AppendTurn(c.ctx, sdk.AppendRequest{ContextID: nope, TypeID: "t", Payload: []byte("x"), IdempotencyKey: "e/1"})
			return err
		}, sdk.ErrNotFound},
		{"append after unknown parent", func() error {
			_, err := c.s.AppendTurn(c.ctx, sdk.AppendRequest{ContextID: c.chainCtx, ParentTurnID: nope, TypeID: "t", Payload: []byte("x"), IdempotencyKey: "e/2"})
			return err
		}, sdk.ErrNotFound},
		{"fork from unknown turn", func() error { _, err := c.s.ForkContext(c.ctx, nope); return err }, sdk.ErrNotFound},
		{"get unknown blob", func() error { _, err := c.s.GetBlob(c.ctx, validHash); return err }, sdk.ErrNotFound},
		{"unknown bundle", func() error { _, err := c.s.Bundle(c.ctx, "no-such-bundle"); return err }, sdk.ErrNotFound},
		{"attach to unknown turn", func() error { return c.s.AttachFS(c.ctx, nope, validHash) }, sdk.ErrNotFound},
		{"attach unknown root", func() error { return c.s.AttachFS(c.ctx, c.chainTurns[0].TurnID, validHash) }, sdk.ErrNotFound},
		{"list unknown context", func() error { _, err := c.s.ListTurns(c.ctx, nope, "", 5); return err }, sdk.ErrNotFound},
		{"malformed context id", func() error { _, err := c.s.Head(c.ctx, "ctx-1"); return err }, sdk.ErrInvalid},
		{"malformed blob hash", func() error { _, err := c.s.GetBlob(c.ctx, "abc"); return err }, sdk.ErrInvalid},
		{"fork from nothing", func() error { _, err := c.s.ForkContext(c.ctx, ""); return err }, sdk.ErrInvalid},
	}
	for _, tc := range cases {
		err := tc.err()
		c.tr.add("%s: %s", tc.name, errKind(err))
		if !errors.Is(err, tc.want) {
			c.t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func (c *checker) paging() {
	h := c.create()
	var all []sdk.StoredTurn
	for i := range 25 {
		all = append(all, c.append(sdk.AppendRequest{ContextID: h.ContextID, Payload: fmt.Appendf(nil, "page-%02d", i), IdempotencyKey: sdk.Key(uint64(i), "paging")}))
	}
	var got []sdk.StoredTurn
	var before sdk.TurnID
	pages := 0
	for {
		page, err := c.s.ListTurns(c.ctx, h.ContextID, before, 10)
		c.must(err, "list turns")
		c.tr.add("page before %s: %d turns, first %s", c.tr.id('T', string(before)), len(page), firstID(c.tr, page))
		if len(page) == 0 {
			break
		}
		pages++
		got = append(page, got...)
		before = page[0].TurnID
	}
	if pages != 3 || len(got) != len(all) {
		c.t.Fatalf("%d pages, %d turns; want 3 and %d", pages, len(got), len(all))
	}
	for i := range all {
		if got[i].TurnID != all[i].TurnID || got[i].Depth != all[i].Depth || string(got[i].Payload) != fmt.Sprintf("page-%02d", i) {
			c.t.Fatalf("turn %d: %+v, want %+v", i, got[i], all[i])
		}
	}
	_, err := c.s.ListTurns(c.ctx, h.ContextID, c.chainTurns[0].TurnID, 10)
	c.tr.add("page before a turn of another chain: %s", errKind(err))
	if !errors.Is(err, sdk.ErrInvalid) {
		c.t.Fatalf("a cursor off the chain: %v, want ErrInvalid", err)
	}
}

func firstID(tr *Transcript, ts []sdk.StoredTurn) string {
	if len(ts) == 0 {
		return "-"
	}
	return tr.id('T', string(ts[0].TurnID))
}

func (c *checker) bundles() {
	id := fmt.Sprintf("sdk-contract-%d", time.Now().UnixNano())
	body := fmt.Appendf(nil, `{"registry_version":1,"bundle_id":%q,"types":{"test.Event":{"versions":{"1":{"fields":{"1":{"name":"text","type":"string"}}}}}}}`, id)
	c.must(c.s.PublishBundle(c.ctx, id, body), "publish")
	c.must(c.s.PublishBundle(c.ctx, id, body), "publish again")
	c.tr.add("publish twice: ok")
	got, err := c.s.Bundle(c.ctx, id)
	c.must(err, "read bundle")
	if !bytes.Equal(got, body) {
		c.t.Fatalf("bundle reads back as %s", got)
	}
	other := bytes.Replace(body, []byte(`"text"`), []byte(`"words"`), 1)
	err = c.s.PublishBundle(c.ctx, id, other)
	c.tr.add("publish other bytes under the id: %s", errKind(err))
	if !errors.Is(err, sdk.ErrConflict) {
		c.t.Fatalf("other bytes under the id: %v, want ErrConflict", err)
	}
	err = c.s.PublishBundle(c.ctx, id+"-x", []byte(`{"bundle_id":`))
	c.tr.add("publish malformed: %s", errKind(err))
	if !errors.Is(err, sdk.ErrInvalid) {
		c.t.Fatalf("malformed bundle: %v, want ErrInvalid", err)
	}
}

func (c *checker) blobs() {
	data := fmt.Appendf(nil, "blob %d", time.Now().UnixNano())
	absent := sdk.HashOf(append(data, '!'))
	missing, err := c.s.MissingBlobs(c.ctx, []sdk.BlobHash{sdk.HashOf(data), absent})
	c.must(err, "missing blobs")
	if len(missing) != 2 {
		c.t.Fatalf("missing before put: %v", missing)
	}
	h, err := c.s.PutBlob(c.ctx, data)
	c.must(err, "put blob")
	if h != sdk.HashOf(data) {
		c.t.Fatalf("put blob hash %s, want %s", h, sdk.HashOf(data))
	}
	got, err := c.s.GetBlob(c.ctx, h)
	c.must(err, "get blob")
	if !bytes.Equal(got, data) {
		c.t.Fatalf("blob reads back as %q", got)
	}
	missing, err = c.s.MissingBlobs(c.ctx, []sdk.BlobHash{h, absent})
	c.must(err, "missing blobs")
	c.tr.add("missing after put: %d", len(missing))
	if len(missing) != 1 || missing[0] != absent {
		c.t.Fatalf("missing after put: %v", missing)
	}
}

func (c *checker) fs() {
	dir := c.t.TempDir()
	stamp := fmt.Sprint(time.Now().UnixNano()) // new blobs on every run
	c.must(os.MkdirAll(filepath.Join(dir, "src", "empty"), 0o755), "mkdir")
	c.must(os.WriteFile(filepath.Join(dir, "src", "main.go"), []byte("package main // "+stamp), 0o644), "write")
	c.must(os.WriteFile(filepath.Join(dir, "README"), []byte("read me"), 0o600), "write")
	c.must(os.Symlink("src/main.go", filepath.Join(dir, "link")), "symlink")
	snap, err := fstree.Capture(dir, fstree.Policy{ID: "contract"})
	c.must(err, "capture")
	h := c.create()
	_, err = c.s.AppendTurn(c.ctx, sdk.AppendRequest{ContextID: h.ContextID, TypeID: "t", Payload: []byte("x"), IdempotencyKey: "fs/0", FSRootHash: snap.Root})
	c.tr.add("append with a root not uploaded: %s", errKind(err))
	if !errors.Is(err, sdk.ErrNotFound) {
		c.t.Fatalf("append with a root not uploaded: %v, want ErrNotFound", err)
	}
	st, err := snap.Upload(c.ctx, c.s)
	c.must(err, "upload")
	c.tr.add("upload: %d blobs, %d uploaded", st.Blobs, st.Uploaded)
	if st.Uploaded != st.Blobs {
		c.t.Fatalf("first upload sent %d of %d blobs", st.Uploaded, st.Blobs)
	}
	if st, err = snap.Upload(c.ctx, c.s); err != nil || st.Uploaded != 0 {
		c.t.Fatalf("second upload sent %d blobs (%v), want 0", st.Uploaded, err)
	}
	t := c.append(sdk.AppendRequest{ContextID: h.ContextID, Payload: []byte("with fs"), IdempotencyKey: "fs/1", FSRootHash: snap.Root})
	later := c.append(sdk.AppendRequest{ContextID: h.ContextID, Payload: []byte("after"), IdempotencyKey: "fs/2"})
	c.must(c.s.AttachFS(c.ctx, later.TurnID, snap.Root), "attach")
	c.tr.add("attach to %s: ok", c.tr.id('T', string(later.TurnID)))
	root, err := c.s.GetBlob(c.ctx, snap.Root)
	c.must(err, "get root tree")
	entries, err := fstree.DecodeTree(root)
	c.must(err, "decode root tree")
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = fmt.Sprintf("%s:%d:%o", e.Name, e.Kind, e.Mode)
	}
	c.tr.add("root tree: %s (turn %s)", strings.Join(names, " "), c.tr.id('T', string(t.TurnID)))
}
