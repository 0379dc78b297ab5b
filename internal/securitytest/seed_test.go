package securitytest_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/cxdbcompat/live"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// ids are what requests name. A request is built from one set: acme's
// (they exist, and only acme may see them) or missing (nothing has them),
// and the suite compares the answers. The Own fields are the caller's own
// things, for requests that mix them with the target's ids (append to my
// context after your turn); they are the same in both sets.
type ids struct {
	Project    string          // the tenant, as CardBox paths name it
	Context    uint64          // a context with three turns
	Fork       uint64          // a context forked from it
	Turn       uint64          // the context's head, which has an fs snapshot
	Blob       cxdbcompat.Hash // a blob stored with PUT_BLOB
	Tree       cxdbcompat.Hash // the root of the head's fs snapshot
	Payload    cxdbcompat.Hash // a turn payload's hash
	File       string          // the one file of the snapshot
	Card       string
	DoomedCard string // a card that acme's own delete removes, last
	// DoomedContext is an empty context acme's own delete removes, last.
	DoomedContext uint64
	Box           string
	DoomedBox     string
	Snapshot      string // a snapshot of Box
	Bundle        string
	TypeID        string
	Title         string // the context's title, from its first turn
	Label         string
	Tag           string // the client tag of the session that made the context
	// The caller's own.
	OwnProject string
	OwnContext uint64
	OwnTurn    uint64
	OwnTree    cxdbcompat.Hash
	OwnCard    string
	OwnBox     string
}

// blobs are acme's bytes, which another tenant may also store.
var (
	acmeBlobBytes = []byte("acme's secret blob")
	acmeFileBytes = []byte("acme's secret file")
)

// missing returns the ids with every target replaced by one that nothing
// has, and the caller's own things kept.
func (p ids) missing() ids {
	m := p
	m.Project = "no-such-project"
	m.Context, m.Fork, m.Turn = 900000000001, 900000000002, 900000000003
	m.DoomedContext = 900000000004
	m.Blob, m.Tree, m.Payload = blake3.Sum256([]byte("no such blob")), blake3.Sum256([]byte("no such tree")), blake3.Sum256([]byte("no such payload"))
	m.File = "no-such-file.txt"
	m.Card, m.DoomedCard, m.Box, m.DoomedBox = "no-such-card", "no-such-doomed-card", "no-such-box", "no-such-doomed-box"
	m.Snapshot = "no-such-snapshot"
	m.Bundle, m.TypeID = "no-such-bundle", "no.such.Type"
	m.Title, m.Label, m.Tag = "No such title", "no-such-label", "no-such-tag"
	return m
}

// renames lists, for every field where q differs from p, q's text and
// p's, longest first: replacing each in an answer to a request built from
// q gives what the answer to p's request must be, byte for byte.
func (p ids) renames(q ids) [][2]string {
	var out [][2]string
	pv, qv := reflect.ValueOf(p), reflect.ValueOf(q)
	for i := range pv.NumField() {
		a, b := idText(pv.Field(i).Interface()), idText(qv.Field(i).Interface())
		if a != b {
			out = append(out, [2]string{b, a})
		}
	}
	slices.SortFunc(out, func(x, y [2]string) int { return cmp.Compare(len(y[0]), len(x[0])) })
	return out
}

func idText(v any) string {
	switch v := v.(type) {
	case uint64:
		return strconv.FormatUint(v, 10)
	case cxdbcompat.Hash:
		return v.String()
	case string:
		return v
	}
	panic(fmt.Sprintf("ids: field of type %T", v))
}

// rename applies renames to an answer.
func rename(b []byte, renames [][2]string) []byte {
	s := string(b)
	for _, r := range renames {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return []byte(s)
}

// markers are strings only acme's data holds: no answer to another tenant
// may contain one.
func (p ids) markers() []string {
	return []string{p.Title, p.Label, p.Tag, p.Bundle, p.TypeID, p.Card, p.Box, "acme's secret", "acme.example"}
}

// bundleJSON is a registry bundle with one type whose one field is of
// fieldType, and a renderer at acme's: acme's own make listings show
// whether they leak.
func bundleJSON(id, typeID, fieldType string) string {
	return fmt.Sprintf(`{"registry_version":1,"bundle_id":%q,"types":{%q:{"versions":{"1":{
	"fields":{"1":{"name":"secret_text","type":%q}},
	"renderer":{"esm_url":"https://acme.example/secret-renderer.js"}}}}}}`, id, typeID, fieldType)
}

// seed stores acme's data through the real surfaces (the binary protocol
// with the key in the client tag, the CXDB and CardBox HTTP APIs) and
// globex's few things, and returns the ids of each, acme's with globex's
// as Own and globex's own with acme's targets (for acme's requests, Own is
// acme's).
func (h *hosted) seed(t *testing.T) (acme, asGlobex ids) {
	t.Helper()
	ctx := context.Background()
	acme = ids{Project: "acme", Bundle: "acme-secret-bundle", TypeID: "com.acme.SecretNote", Title: "Acme secret title",
		Label: "acme-secret-label", Tag: "acme-agent", File: "acme-secret.txt", Card: "acme-card-1", DoomedCard: "acme-doomed-card",
		Box: "acme-box", DoomedBox: "acme-doomed-box"}

	h.do(t, acmeWriter, request{"PUT", "/v1/registry/bundles/" + registry.ConversationBundleID, string(registry.ConversationBundle)}).want(t, http.StatusCreated)
	h.do(t, acmeWriter, request{"PUT", "/v1/registry/bundles/" + acme.Bundle, bundleJSON(acme.Bundle, acme.TypeID, "string")}).want(t, http.StatusCreated)

	c := h.client(t, client.WithClientTag(acme.Tag+";key="+h.secrets[acmeWriter]))
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	acme.Context = head.ContextID
	doomed, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	acme.DoomedContext = doomed.ContextID
	// The first turn, over HTTP, names the context; its metadata is
	// extracted off the append path, and the event says when.
	stream := h.svc.Hub().Stream
	sub := stream.Subscribe("acme", stream.LastID("acme"))
	defer sub.Close()
	first := fmt.Sprintf(`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"user_input","status":"complete",
		"user_input":{"text":"acme's secret question"},
		"context_metadata":{"client_tag":"acme-agent","title":%q,"labels":[%q]}}}`, acme.Title, acme.Label)
	h.do(t, acmeWriter, request{"POST", fmt.Sprintf("/v1/contexts/%d/append", acme.Context), first}).want(t, http.StatusCreated)
	waitEvent(t, sub, live.ContextMetadataUpdated, acme.Context)

	note, err := msgpack.Marshal(map[string]any{"1": "acme's secret note"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: acme.Context, TypeID: acme.TypeID, TypeVersion: 1, Payload: note})
	if err != nil {
		t.Fatal(err)
	}
	acme.Payload = second.ContentHash
	acme.Blob = putBlob(t, c, acmeBlobBytes)
	acme.Tree = putTree(t, c, acme.File, acmeFileBytes)
	third, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: acme.Context, TypeID: acme.TypeID, TypeVersion: 1, Payload: note, FSRootHash: &acme.Tree})
	if err != nil {
		t.Fatal(err)
	}
	acme.Turn = third.NewTurnID
	var fork struct {
		ContextID string `json:"context_id"`
	}
	h.do(t, acmeWriter, request{"POST", "/v1/contexts/fork", fmt.Sprintf(`{"base_turn_id":"%d"}`, second.NewTurnID)}).want(t, http.StatusCreated).json(t, &fork)
	if acme.Fork, err = strconv.ParseUint(fork.ContextID, 10, 64); err != nil {
		t.Fatal(err)
	}

	cards := fmt.Sprintf(`{"cards":[%s,%s,%s]}`, cardJSON(acme.Card, "acme's secret card 1"),
		cardJSON("acme-card-2", "acme's secret card 2"), cardJSON(acme.DoomedCard, "acme's secret doomed card"))
	h.do(t, acmeWriter, request{"POST", "/projects/acme/cards", cards}).want(t, http.StatusCreated)
	for _, box := range []string{acme.Box, acme.DoomedBox} {
		h.do(t, acmeWriter, request{"PUT", "/projects/acme/boxes/" + box, `{"card_ids":["acme-card-1","acme-card-2"]}`}).want(t, http.StatusOK)
	}
	var snap struct {
		SnapshotID string `json:"snapshot_id"`
	}
	h.do(t, acmeWriter, request{"POST", "/projects/acme/boxes/" + acme.Box + "/snapshots", `{}`}).want(t, http.StatusCreated).json(t, &snap)
	acme.Snapshot = snap.SnapshotID
	acme.OwnProject, acme.OwnContext, acme.OwnTurn, acme.OwnTree, acme.OwnCard, acme.OwnBox =
		acme.Project, acme.Context, acme.Turn, acme.Tree, "acme-card-2", acme.Box

	// globex has a little of its own: a context, a turn, a tree, a card
	// and a box, with the key in HELLO's metadata.
	asGlobex = acme
	asGlobex.OwnProject, asGlobex.OwnCard, asGlobex.OwnBox = "globex", "globex-card", "globex-box"
	g := h.client(t, client.WithClientMeta([]byte(`{"api_key":"`+h.secrets[globexWriter]+`"}`)))
	gh, err := g.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	asGlobex.OwnContext = gh.ContextID
	asGlobex.OwnTree = putTree(t, g, "globex.txt", []byte("globex's file"))
	// A first turn with metadata (msgpack, as the official clients write
	// it): its extraction, off the append path, ends with an event, which
	// the suite waits for before it compares anything.
	gsub := stream.Subscribe("globex", stream.LastID("globex"))
	defer gsub.Close()
	gfirst, err := msgpack.Marshal(map[string]any{"1": "user_input", "30": map[string]any{"1": "globex-agent", "2": "Globex title"}})
	if err != nil {
		t.Fatal(err)
	}
	gt, err := g.AppendTurn(ctx, &client.AppendRequest{ContextID: gh.ContextID, TypeID: "com.globex.Note", TypeVersion: 1, Payload: gfirst})
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(t, gsub, live.ContextMetadataUpdated, gh.ContextID)
	asGlobex.OwnTurn = gt.NewTurnID
	h.do(t, globexWriter, request{"POST", "/projects/globex/cards", `{"cards":[` + cardJSON(asGlobex.OwnCard, "globex's card") + `]}`}).want(t, http.StatusCreated)
	h.do(t, globexWriter, request{"PUT", "/projects/globex/boxes/globex-box", `{"card_ids":["globex-card"]}`}).want(t, http.StatusOK)
	return acme, asGlobex
}

func cardJSON(id, content string) string {
	return fmt.Sprintf(`{"card_id":%q,"content":%q,"metadata":{"type":"task.instruction"}}`, id, content)
}

// client dials the binary listener with the repository's client, closed
// when the test ends.
func (h *hosted) client(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	c, err := client.Dial(ctx, h.binAddr, opts...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func putBlob(t *testing.T, c *client.Client, data []byte) cxdbcompat.Hash {
	t.Helper()
	hash, _, err := c.PutBlob(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	return hash
}

// putTree stores a one-file fs snapshot and returns its root.
func putTree(t *testing.T, c *client.Client, name string, content []byte) cxdbcompat.Hash {
	t.Helper()
	file := putBlob(t, c, content)
	return putBlob(t, c, fstree.Encode([]fstree.Entry{{Name: name, Kind: fstree.KindFile, Mode: 0o644, Size: uint64(len(content)), Hash: file, HashOK: true}}))
}
