package cxdbhttp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/internal/testkit"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// userTurn is a ConversationItem as the official Go client writes it
// (digit-string keys), with first-turn metadata when title is set.
func userTurn(t testing.TB, text, title string, labels ...string) []byte {
	t.Helper()
	item := map[string]any{"1": "user_input", "2": "complete", "3": int64(1700000000000), "10": map[string]any{"1": text}}
	if title != "" {
		item["30"] = map[string]any{"1": "test-agent", "2": title, "3": labels,
			"10": map[string]any{"20": "alice", "40": "svc-a", "45": "host-1", "1": uint64(7)}}
	}
	b, err := msgpack.Marshal(item)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendBinary(t testing.TB, c *client.Client, ctxID uint64, payload []byte) client.AppendResult {
	t.Helper()
	res, err := c.AppendTurn(context.Background(), &client.AppendRequest{
		ContextID: ctxID, TypeID: "cxdb.ConversationItem", TypeVersion: 3, Payload: payload,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

type turnsBody struct {
	Meta struct {
		ContextID        string  `json:"context_id"`
		HeadTurnID       string  `json:"head_turn_id"`
		HeadDepth        int     `json:"head_depth"`
		RegistryBundleID *string `json:"registry_bundle_id"`
	} `json:"meta"`
	Turns []struct {
		TurnID       string         `json:"turn_id"`
		ParentTurnID string         `json:"parent_turn_id"`
		Depth        int            `json:"depth"`
		DecodedAs    map[string]any `json:"decoded_as"`
		Data         map[string]any `json:"data"`
		Unknown      map[string]any `json:"unknown"`
		Error        map[string]any `json:"error"`
		BytesB64     string         `json:"bytes_b64"`
	} `json:"turns"`
	NextBeforeTurnID *string `json:"next_before_turn_id"`
	NextCursor       string  `json:"next_cursor"`
	PrevCursor       string  `json:"prev_cursor"`
}

func TestRegistryPublishAndRead(t *testing.T) {
	h := apitest.NewCXDB(t)
	bundle := registry.ConversationBundle
	path := "/v1/registry/bundles/cxdb-conversation-v3"
	h.Call(http.MethodPut, path, bundle).Want(t, http.StatusCreated)
	h.Call(http.MethodPut, path, bundle).Want(t, http.StatusNoContent)

	got := h.Get(path).Want(t, http.StatusOK)
	if !bytes.Equal(got.Body, bundle) || got.Header.Get("ETag") == "" {
		t.Fatalf("bundle read back differs or has no ETag")
	}
	h.Get(path, "If-None-Match", got.Header.Get("ETag")).Want(t, http.StatusNotModified)

	var types struct{ Types []map[string]any }
	h.Get("/v1/registry/types").Want(t, http.StatusOK).JSON(t, &types)
	if len(types.Types) < 10 {
		t.Fatalf("types listed: %d", len(types.Types))
	}
	var d struct{ Fields map[string]map[string]any }
	h.Get("/v1/registry/types/cxdb.ConversationItem/versions/3").Want(t, http.StatusOK).JSON(t, &d)
	if d.Fields["1"]["name"] != "item_type" {
		t.Fatalf("descriptor: %v", d.Fields["1"])
	}
	var r struct{ Renderers map[string]map[string]any }
	h.Get("/v1/registry/renderers").Want(t, http.StatusOK).JSON(t, &r)
	if r.Renderers["cxdb.ConversationItem"]["esm_url"] == nil {
		t.Fatalf("renderers: %v", r.Renderers)
	}
	h.Get("/v1/registry/types/cxdb.ConversationItem/versions/99").Want(t, http.StatusNotFound)
	h.Get("/v1/registry/types/cxdb.ConversationItem/versions/x").Want(t, http.StatusBadRequest)
}

func TestRegistryRefusals(t *testing.T) {
	h := apitest.NewCXDB(t)
	put := func(id, body string) apitest.Response {
		return h.Call(http.MethodPut, "/v1/registry/bundles/"+id, body)
	}
	v1 := `{"registry_version":1,"bundle_id":"b1","types":{"t":{"versions":{"2":{"fields":{"1":{"name":"a","type":"string"}}}}}}}`
	put("b1", v1).Want(t, http.StatusCreated)
	tests := []struct {
		name, id, body string
		status         int
	}{
		{"same id, other content", "b1", strings.Replace(v1, `"a"`, `"b"`, 1), http.StatusConflict},
		{"tag retyped", "b2", `{"registry_version":1,"bundle_id":"b2","types":{"t":{"versions":{"3":{"fields":{"1":{"name":"a","type":"u64"}}}}}}}`, http.StatusConflict},
		{"version going back", "b3", `{"registry_version":1,"bundle_id":"b3","types":{"t":{"versions":{"1":{"fields":{"1":{"name":"a","type":"string"}}}}}}}`, http.StatusConflict},
		{"not JSON", "b4", `{`, http.StatusUnprocessableEntity},
		{"path id differs", "other", `{"registry_version":1,"bundle_id":"b5"}`, http.StatusUnprocessableEntity},
		{"bundle id with #, percent-encoded", "x%23y", `{"registry_version":1,"bundle_id":"x#y"}`, http.StatusCreated},
		{"bundle id with %, percent-encoded", "50%25", `{"registry_version":1,"bundle_id":"50%"}`, http.StatusCreated},
		{"bundle id with an escape's text", "a%2541", `{"registry_version":1,"bundle_id":"a%41"}`, http.StatusCreated},
		// Refused, naming where, before Postgres sees them.
		{"NUL in the path's bundle id", "a%00b", `{"registry_version":1,"bundle_id":"a\u0000b"}`, http.StatusBadRequest},
		{"NUL in the body's bundle id", "ab", `{"registry_version":1,"bundle_id":"a\u0000b"}`, http.StatusBadRequest},
		{"NUL in a type id", "b6", `{"registry_version":1,"bundle_id":"b6","types":{"t\u0000x":{"versions":{"1":{"fields":{"1":{"name":"a","type":"string"}}}}}}}`, http.StatusBadRequest},
		{"invalid UTF-8 in a type id", "b7", "{\"registry_version\":1,\"bundle_id\":\"b7\",\"types\":{\"t\xff\":{\"versions\":{}}}}", http.StatusBadRequest},
		{"lone surrogate in a field name", "b8", `{"registry_version":1,"bundle_id":"b8","types":{"t8":{"versions":{"1":{"fields":{"1":{"name":"\ud800","type":"string"}}}}}}}`, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := put(tt.id, tt.body).Want(t, tt.status)
			if tt.status >= 400 {
				if e := r.APIError(t); e.Status != tt.status || e.Message == "" || e.Kind == "" {
					t.Fatalf("error body %s", r.Body)
				}
			}
		})
	}
	// The fixtures of ../shared/fixtures/cxdb/registry are not in the
	// accepted format.
	for _, f := range testkit.CXDBFixtureFiles(t, "registry") {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h.Call(http.MethodPut, "/v1/registry/bundles/fixture", body).Want(t, http.StatusUnprocessableEntity)
	}
	h.Get("/v1/registry/bundles/x%23y").Want(t, http.StatusOK)
	h.Get("/v1/registry/bundles/50%25").Want(t, http.StatusOK)
	if body := h.Get("/v1/registry/bundles/a%2541").Want(t, http.StatusOK).Body; !strings.Contains(string(body), `"a%41"`) {
		t.Errorf("bundle a%%41: %s", body)
	}
}

func TestBinaryWritesReadTypedOverHTTP(t *testing.T) {
	h := apitest.NewCXDB(t)
	h.PublishConversationBundle()
	c := h.Client(client.WithClientTag("writer"))
	head, err := c.CreateContext(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	fixture := testkit.TypePayload(t, "msgpack_conversation_item")
	first := appendBinary(t, c, head.ContextID, fixture)
	appendBinary(t, c, head.ContextID, userTurn(t, "second", ""))

	var page turnsBody
	h.Get(fmt.Sprintf("/v1/contexts/%d/turns?limit=100&view=typed&include_unknown=true", head.ContextID)).Want(t, http.StatusOK).JSON(t, &page)
	if len(page.Turns) != 2 || page.Turns[0].TurnID != fmt.Sprint(first.NewTurnID) || page.Turns[0].ParentTurnID != "0" {
		t.Fatalf("page: %+v", page)
	}
	d := page.Turns[0].Data
	if d["item_type"] != "user_input" || d["timestamp"] != "2023-11-14T22:13:20+00:00" ||
		d["user_input"].(map[string]any)["text"] != "Hello from fixtures" {
		t.Fatalf("typed data: %v", d)
	}
	if page.Turns[0].Unknown == nil || page.Meta.RegistryBundleID == nil || *page.Meta.RegistryBundleID != "cxdb-conversation-v3" {
		t.Fatalf("unknown %v meta %+v", page.Turns[0].Unknown, page.Meta)
	}

	// The first turn's metadata reaches the listing.
	var list struct{ Contexts []map[string]any }
	waitfor.Soon(t, "metadata in the context list", func() bool {
		h.Get("/v1/contexts?limit=1000&include_provenance=1").Want(t, http.StatusOK).JSON(t, &list)
		return len(list.Contexts) == 1 && list.Contexts[0]["title"] == "Fixture Title"
	})
	ctx := list.Contexts[0]
	if ctx["client_tag"] != "fixture-tag" || ctx["is_live"] != true || fmt.Sprint(ctx["labels"]) != "[alpha beta]" {
		t.Fatalf("context entry: %v", ctx)
	}
}

func TestTurnsOfAnUnregisteredTypeCarryAnErrorAndTheOthersRender(t *testing.T) {
	h := apitest.NewCXDB(t)
	h.PublishConversationBundle()
	c := h.Client()
	head, _ := c.CreateContext(context.Background(), 0)
	appendBinary(t, c, head.ContextID, userTurn(t, "hi", ""))
	if _, err := c.AppendTurn(context.Background(), &client.AppendRequest{
		ContextID: head.ContextID, TypeID: "acme.Unknown", TypeVersion: 1, Payload: []byte{0x80},
	}); err != nil {
		t.Fatal(err)
	}
	var page turnsBody
	h.Get(fmt.Sprintf("/v1/contexts/%d/turns", head.ContextID)).Want(t, http.StatusOK).JSON(t, &page)
	if len(page.Turns) != 2 || page.Turns[0].Data["item_type"] != "user_input" {
		t.Fatalf("first turn: %+v", page.Turns)
	}
	if e := page.Turns[1].Error; e == nil || e["type_id"] != "acme.Unknown" || page.Turns[1].Data != nil {
		t.Fatalf("second turn error: %v", page.Turns[1])
	}
}

// Rendered turns are cached; publishing a bundle must change what a page
// shows at once, whether the turn rendered with an error before or not.
func TestTypedPagesFollowTheRegistry(t *testing.T) {
	h := apitest.NewCXDB(t)
	c := h.Client()
	head, _ := c.CreateContext(context.Background(), 0)
	payload, _ := msgpack.Marshal(map[string]any{"1": "a", "2": "b"})
	if _, err := c.AppendTurn(context.Background(), &client.AppendRequest{
		ContextID: head.ContextID, TypeID: "acme.Note", TypeVersion: 1, Payload: payload,
	}); err != nil {
		t.Fatal(err)
	}
	page := func(query string) turnsBody {
		t.Helper()
		var p turnsBody
		h.Get(fmt.Sprintf("/v1/contexts/%d/turns?%s", head.ContextID, query)).Want(t, http.StatusOK).JSON(t, &p)
		if len(p.Turns) != 1 {
			t.Fatalf("turns = %+v", p.Turns)
		}
		return p
	}
	if p := page(""); p.Turns[0].Error == nil {
		t.Fatalf("before any bundle: %+v", p.Turns[0])
	}
	bundle := func(id, versions string) string {
		return `{"registry_version":1,"bundle_id":"` + id + `","types":{"acme.Note":{"versions":{` + versions + `}}}}`
	}
	v1 := `"1":{"fields":{"1":{"name":"text","type":"string"}}}`
	h.Call(http.MethodPut, "/v1/registry/bundles/b1", bundle("b1", v1)).Want(t, http.StatusCreated)
	for range 2 { // the second read is served from the cache
		if p := page("type_hint_mode=latest"); p.Turns[0].Error != nil || fmt.Sprint(p.Turns[0].Data) != "map[text:a]" {
			t.Fatalf("with v1: %+v", p.Turns[0])
		}
	}
	v2 := `"2":{"fields":{"1":{"name":"text","type":"string"},"2":{"name":"note","type":"string"}}}`
	h.Call(http.MethodPut, "/v1/registry/bundles/b2", bundle("b2", v1+","+v2)).Want(t, http.StatusCreated)
	if p := page("type_hint_mode=latest"); fmt.Sprint(p.Turns[0].Data) != "map[note:b text:a]" {
		t.Fatalf("latest after v2 was published: %+v", p.Turns[0])
	}
	if p := page(""); fmt.Sprint(p.Turns[0].Data) != "map[text:a]" {
		t.Fatalf("declared v1 after v2 was published: %+v", p.Turns[0])
	}
}

func TestHTTPWritesReadBackByteIdenticalOverBinary(t *testing.T) {
	h := apitest.NewCXDB(t)
	h.PublishConversationBundle()
	var created map[string]any
	h.Call(http.MethodPost, "/v1/contexts/create", `{"base_turn_id":"0"}`).Want(t, http.StatusCreated).JSON(t, &created)
	ctxID := created["context_id"].(string)

	data := `{"item_type":"user_input","status":"complete","timestamp":"2023-11-14T22:13:20+00:00","user_input":{"text":"hello","files":["a.txt"]}}`
	reordered := `{"user_input":{"files":["a.txt"],"text":"hello"},"timestamp":"2023-11-14T22:13:20+00:00","status":"complete","item_type":"user_input"}`
	var a1, a2 map[string]any
	h.Call(http.MethodPost, "/v1/contexts/"+ctxID+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":`+data+`}`).Want(t, http.StatusCreated).JSON(t, &a1)
	h.Call(http.MethodPost, "/v1/contexts/"+ctxID+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":`+reordered+`,"idempotency_key":"k1"}`).Want(t, http.StatusCreated).JSON(t, &a2)
	if a1["content_hash_b3"] != a2["content_hash_b3"] || a2["depth"] != float64(2) || a2["parent_turn_id"] != a1["turn_id"] {
		t.Fatalf("appends: %v %v", a1, a2)
	}
	var again map[string]any
	h.Call(http.MethodPost, "/v1/contexts/"+ctxID+"/append",
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":`+reordered+`,"idempotency_key":"k1"}`).Want(t, http.StatusCreated).JSON(t, &again)
	if again["turn_id"] != a2["turn_id"] {
		t.Fatalf("idempotent replay made turn %v, want %v", again["turn_id"], a2["turn_id"])
	}

	// Over the binary protocol: the same bytes, and they decode with tags.
	c := h.Client()
	var id uint64
	if _, err := fmt.Sscan(ctxID, &id); err != nil {
		t.Fatal(err)
	}
	turns, err := c.GetLast(context.Background(), id, 10, true)
	if err != nil || len(turns) != 2 {
		t.Fatalf("GET_LAST: %v %d", err, len(turns))
	}
	if !bytes.Equal(turns[0].Payload, turns[1].Payload) {
		t.Fatal("same data in another key order gave other bytes")
	}
	var decoded map[string]any
	if err := msgpack.Unmarshal(turns[0].Payload, &decoded); err != nil || decoded["1"] != "user_input" {
		t.Fatalf("payload %v: %v", decoded, err)
	}
	// A turn written over binary reads back identical over HTTP raw view.
	payload := userTurn(t, "from binary", "")
	appendBinary(t, c, id, payload)
	var page turnsBody
	h.Get("/v1/contexts/"+ctxID+"/turns?view=raw&limit=1").Want(t, http.StatusOK).JSON(t, &page)
	if len(page.Turns) != 1 || page.Turns[0].BytesB64 != base64.StdEncoding.EncodeToString(payload) {
		t.Fatalf("raw view does not give the bytes written over binary: %+v", page)
	}

	bad := []struct{ body, field string }{
		{`{"type_id":"nope","type_version":1,"data":{}}`, "type_id"},
		{`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":5}}`, "data.item_type"},
		{`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"bogus":1}}`, "data.bogus"},
	}
	for _, b := range bad {
		r := h.Call(http.MethodPost, "/v1/contexts/"+ctxID+"/append", b.body).Want(t, http.StatusUnprocessableEntity)
		if e := r.APIError(t); e.Details["field"] != b.field {
			t.Errorf("%s: details %v, want field %s", b.body, e.Details, b.field)
		}
	}
	h.Call(http.MethodPost, "/v1/contexts/999999/append", `{"type_id":"cxdb.ConversationItem","type_version":3,"data":{}}`).Want(t, http.StatusNotFound)

	var fork map[string]any
	h.Call(http.MethodPost, "/v1/contexts/fork", map[string]any{"base_turn_id": a1["turn_id"]}).Want(t, http.StatusCreated).JSON(t, &fork)
	if fork["head_turn_id"] != a1["turn_id"] || fork["head_depth"] != float64(1) {
		t.Fatalf("fork: %v", fork)
	}
}

func TestTurnPagingAndBadParameters(t *testing.T) {
	h := apitest.NewCXDB(t)
	h.PublishConversationBundle()
	c := h.Client()
	head, _ := c.CreateContext(context.Background(), 0)
	var ids []string
	for i := range 7 {
		r := appendBinary(t, c, head.ContextID, userTurn(t, fmt.Sprint("turn ", i), ""))
		ids = append(ids, fmt.Sprint(r.NewTurnID))
	}
	base := fmt.Sprintf("/v1/contexts/%d/turns", head.ContextID)
	var p1, p2, back turnsBody
	h.Get(base+"?limit=3").Want(t, http.StatusOK).JSON(t, &p1)
	if len(p1.Turns) != 3 || p1.Turns[2].TurnID != ids[6] || p1.NextCursor == "" || p1.PrevCursor != "" || *p1.NextBeforeTurnID != ids[4] {
		t.Fatalf("first page %+v", p1)
	}
	h.Get(base+"?limit=3&cursor="+p1.NextCursor).Want(t, http.StatusOK).JSON(t, &p2)
	if len(p2.Turns) != 3 || p2.Turns[0].TurnID != ids[1] || p2.Turns[2].TurnID != ids[3] || p2.PrevCursor == "" {
		t.Fatalf("second page %+v", p2)
	}
	h.Get(base+"?limit=3&cursor="+p2.PrevCursor).Want(t, http.StatusOK).JSON(t, &back)
	if len(back.Turns) != 3 || back.Turns[0].TurnID != ids[4] {
		t.Fatalf("page back %+v", back)
	}
	var before turnsBody
	h.Get(base+"?limit=10&before_turn_id="+ids[2]).Want(t, http.StatusOK).JSON(t, &before)
	if len(before.Turns) != 2 || before.Turns[1].TurnID != ids[1] {
		t.Fatalf("before page %+v", before)
	}

	other, _ := c.CreateContext(context.Background(), 0)
	foreign := appendBinary(t, c, other.ContextID, userTurn(t, "elsewhere", ""))
	for _, tt := range []struct{ query, param string }{
		{fmt.Sprint("?before_turn_id=", foreign.NewTurnID), "before_turn_id"},
		{"?limit=abc", "limit"},
		{"?cursor=zzz", "cursor"},
		{"?view=fancy", "view"},
		{"?type_hint_mode=explicit", "as_type_id"},
	} {
		r := h.Get(base+tt.query).Want(t, http.StatusBadRequest)
		if e := r.APIError(t); e.Details["parameter"] != tt.param {
			t.Errorf("%s: %s", tt.query, r.Body)
		}
	}
	h.Get("/v1/contexts/abc/turns").Want(t, http.StatusBadRequest)
	h.Get("/v1/contexts/987654/turns").Want(t, http.StatusNotFound)

	var empty turnsBody
	fresh, _ := c.CreateContext(context.Background(), 0)
	h.Get(fmt.Sprintf("/v1/contexts/%d/turns", fresh.ContextID)).Want(t, http.StatusOK).JSON(t, &empty)
	if empty.Turns == nil || len(empty.Turns) != 0 || empty.NextBeforeTurnID != nil {
		t.Fatalf("empty context page %s", h.Get(fmt.Sprintf("/v1/contexts/%d/turns", fresh.ContextID)).Body)
	}
}

func TestContextListPagesNewestFirstAndSearchFindsForks(t *testing.T) {
	h := apitest.NewCXDB(t)
	c := h.Client()
	var ctxIDs []uint64
	for i := range 5 {
		head, _ := c.CreateContext(context.Background(), 0)
		appendBinary(t, c, head.ContextID, userTurn(t, "x", fmt.Sprint("title ", i), "env=prod"))
		ctxIDs = append(ctxIDs, head.ContextID)
	}
	// Touch the first context last: it lists first. The list orders by the
	// millisecond of the last update, then by id: the touch must fall in a
	// later millisecond than the appends before it.
	for last := time.Now(); time.Since(last) < 2*time.Millisecond; {
	}
	appendBinary(t, c, ctxIDs[0], userTurn(t, "again", ""))
	var page1, page2 struct {
		Contexts   []map[string]any
		NextCursor string `json:"next_cursor"`
		HasMore    bool   `json:"has_more"`
	}
	h.Get("/v1/contexts?limit=3").Want(t, http.StatusOK).JSON(t, &page1)
	if len(page1.Contexts) != 3 || page1.Contexts[0]["context_id"] != fmt.Sprint(ctxIDs[0]) || !page1.HasMore {
		t.Fatalf("page 1: %+v", page1)
	}
	h.Get("/v1/contexts?limit=3&cursor="+page1.NextCursor).Want(t, http.StatusOK).JSON(t, &page2)
	if len(page2.Contexts) != 2 || page2.HasMore {
		t.Fatalf("page 2: %+v", page2)
	}

	head, _ := c.GetHead(context.Background(), ctxIDs[1])
	fork, err := c.ForkContext(context.Background(), head.HeadTurnID)
	if err != nil {
		t.Fatal(err)
	}
	var found struct {
		Contexts   []map[string]any
		TotalCount int `json:"total_count"`
	}
	waitfor.Soon(t, "the fork to be searchable by its origin's title", func() bool {
		h.Get("/v1/contexts/search?q="+urlQuery(`title = "title 1"`)).Want(t, http.StatusOK).JSON(t, &found)
		return found.TotalCount == 2
	})
	if found.Contexts[0]["context_id"] != fmt.Sprint(fork.ContextID) {
		t.Fatalf("search: %+v", found)
	}
	h.Get("/v1/contexts/search?q="+urlQuery(`label = "env=prod" AND depth >= 2`)).Want(t, http.StatusOK).JSON(t, &found)
	if found.TotalCount != 1 {
		t.Fatalf("label and depth: %+v", found)
	}

	var cqlErr map[string]any
	h.Get("/v1/contexts/search?q="+urlQuery(`nope = 1`)).Want(t, http.StatusBadRequest).JSON(t, &cqlErr)
	if cqlErr["error_type"] != "UnknownField" || cqlErr["field"] != "nope" {
		t.Fatalf("CQL error: %v", cqlErr)
	}
	h.Get("/v1/contexts/search").Want(t, http.StatusBadRequest).JSON(t, &cqlErr)
	if cqlErr["error"] != "Missing required 'q' parameter" {
		t.Fatalf("missing q: %v", cqlErr)
	}
	var filtered struct{ Contexts []map[string]any }
	waitfor.Soon(t, "a context filtered by label and title", func() bool {
		h.Get("/v1/contexts?label=env%3Dprod&title=TITLE%203").Want(t, http.StatusOK).JSON(t, &filtered)
		return len(filtered.Contexts) == 1
	})
	if filtered.Contexts[0]["context_id"] != fmt.Sprint(ctxIDs[3]) {
		t.Fatalf("filtered: %v", filtered)
	}
	var prov map[string]any
	h.Get(fmt.Sprintf("/v1/contexts/%d/provenance", ctxIDs[2])).Want(t, http.StatusOK).JSON(t, &prov)
	p, _ := prov["provenance"].(map[string]any)
	if len(p) != 25 || p["on_behalf_of"] != "alice" {
		t.Fatalf("provenance: %v", prov)
	}
	h.Get("/v1/contexts/123456/provenance").Want(t, http.StatusNotFound)
}

func urlQuery(s string) string {
	return strings.NewReplacer(" ", "%20", `"`, "%22", "=", "%3D", ">", "%3E", "&", "%26").Replace(s)
}

func TestEventsFollowWritesOfBothSurfacesAndResume(t *testing.T) {
	h := apitest.NewCXDB(t)
	h.PublishConversationBundle()
	stream := h.Events("")
	connected := stream.Next()
	if connected.Name != "connected" {
		t.Fatalf("first event %q", connected.Name)
	}
	c := h.Client(client.WithClientTag("bot"))
	if ev := stream.Until("client_connected"); ev.Data["client_tag"] != "bot" {
		t.Fatalf("client_connected %v", ev.Data)
	}
	head, _ := c.CreateContext(context.Background(), 0)
	created := stream.Until("context_created")
	if created.Data["context_id"] != fmt.Sprint(head.ContextID) || created.Data["session_id"] == nil {
		t.Fatalf("context_created %v", created.Data)
	}
	appendBinary(t, c, head.ContextID, userTurn(t, "hi", "Live title"))
	appended := stream.Until("turn_appended")
	if appended.Data["depth"] != float64(1) || appended.Data["declared_type_id"] != "cxdb.ConversationItem" {
		t.Fatalf("turn_appended %v", appended.Data)
	}
	if md := stream.Until("context_metadata_updated"); md.Data["title"] != "Live title" || md.Data["has_provenance"] != true {
		t.Fatalf("metadata %v", md.Data)
	}
	h.Call(http.MethodPost, fmt.Sprintf("/v1/contexts/%d/append", head.ContextID),
		`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"system"}}`).Want(t, http.StatusCreated)
	httpAppend := stream.Until("turn_appended")
	if httpAppend.Data["depth"] != float64(2) || httpAppend.ID == "" {
		t.Fatalf("HTTP append event %v", httpAppend)
	}

	// Resume: a client that saw the first turn_appended gets the second.
	resumed := h.Events(appended.ID)
	resumed.Next() // connected
	if ev := resumed.Until("turn_appended"); ev.ID != httpAppend.ID {
		t.Fatalf("resumed at %s, want %s", ev.ID, httpAppend.ID)
	}
	// An id of another process cannot resume: reset.
	stale := h.Events("zz-5")
	stale.Next()
	if ev := stale.Next(); ev.Name != "reset" {
		t.Fatalf("stale id got %q", ev.Name)
	}
	c.Close()
	if ev := stream.Until("client_disconnected"); fmt.Sprint(ev.Data["contexts"]) != fmt.Sprintf("[%d]", head.ContextID) {
		t.Fatalf("client_disconnected %v", ev.Data)
	}
}

func TestMetricsHaveTheShapeTheUIReads(t *testing.T) {
	h := apitest.NewCXDB(t)
	var m map[string]map[string]any
	body := h.Get("/v1/metrics").Want(t, http.StatusOK)
	var raw map[string]json.RawMessage
	body.JSON(t, &raw)
	for _, k := range []string{"ts", "uptime_seconds"} {
		if raw[k] == nil {
			t.Fatalf("metrics lack %s", k)
		}
	}
	delete(raw, "ts")
	delete(raw, "uptime_seconds")
	b, _ := json.Marshal(raw)
	json.Unmarshal(b, &m)
	want := map[string][]string{
		"storage":    {"turns_log_bytes", "turns_index_bytes", "turns_meta_bytes", "heads_table_bytes", "blobs_pack_bytes", "blobs_index_bytes", "data_dir_total_bytes", "data_dir_free_bytes"},
		"objects":    {"contexts_total", "turns_total", "blobs_total", "registry_types_total", "registry_bundles_total"},
		"perf":       {"append_tps_1m", "get_last_tps_1m", "http_req_tps_1m", "http_errors_tps_1m", "append_tps_history", "get_last_tps_history", "http_req_tps_history", "append_latency_ms", "get_last_latency_ms", "get_blob_latency_ms"},
		"sessions":   {"active", "idle", "total"},
		"errors":     {"total", "by_type"},
		"filesystem": {"snapshots_total"},
		"memory":     {"process_rss_bytes"},
	}
	for obj, keys := range want {
		for _, k := range keys {
			if _, ok := m[obj][k]; !ok {
				t.Errorf("metrics %s.%s missing", obj, k)
			}
		}
	}
}

func TestMetricsCountWhatHappened(t *testing.T) {
	h := apitest.NewCXDB(t)
	h.PublishConversationBundle()
	c := h.Client()
	head, err := c.CreateContext(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	appendBinary(t, c, head.ContextID, userTurn(t, "hello", ""))
	for range 3 {
		if _, err := c.GetLast(context.Background(), head.ContextID, 10, true); err != nil {
			t.Fatal(err)
		}
	}
	h.Get("/v1/contexts").Want(t, http.StatusOK)
	h.Get("/v1/contexts/nope").Want(t, http.StatusBadRequest)

	var m struct {
		Objects map[string]int64 `json:"objects"`
		Perf    struct {
			Append  latencyJSON `json:"append_latency_ms"`
			GetLast latencyJSON `json:"get_last_latency_ms"`
			GetBlob latencyJSON `json:"get_blob_latency_ms"`
			HTTP    latencyJSON `json:"http_latency_ms"`
		} `json:"perf"`
		Errors struct {
			Total int64 `json:"total"`
		} `json:"errors"`
	}
	h.Get("/v1/metrics").Want(t, http.StatusOK).JSON(t, &m)
	if m.Objects["registry_bundles_total"] != 1 || m.Objects["registry_types_total"] != 14 || m.Objects["turns_total"] != 1 {
		t.Errorf("objects = %v", m.Objects)
	}
	for name, l := range map[string]struct {
		got  latencyJSON
		want uint64
	}{"append": {m.Perf.Append, 1}, "get_last": {m.Perf.GetLast, 3}, "get_blob": {m.Perf.GetBlob, 0}, "http": {m.Perf.HTTP, 3}} {
		if l.got.Count != l.want {
			t.Errorf("%s latency count = %d, want %d", name, l.got.Count, l.want)
		}
		if (l.want > 0) != (l.got.P50 != nil && l.got.P99 != nil && *l.got.P50 > 0 && *l.got.P50 <= *l.got.P99) {
			t.Errorf("%s latency = p50 %v p99 %v with %d requests", name, l.got.P50, l.got.P99, l.got.Count)
		}
	}
	if m.Errors.Total != 1 {
		t.Errorf("errors = %d, want the one 400", m.Errors.Total)
	}
}

// latencyJSON is a latency object of /v1/metrics.
type latencyJSON struct {
	P50   *float64 `json:"p50"`
	P99   *float64 `json:"p99"`
	Count uint64   `json:"count"`
}
