package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/metastore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// conversationItem is the conversation bundle's item type.
const (
	conversationItem    = "cxdb.ConversationItem"
	conversationVersion = 3
)

// fixture is a service over a real turn store (files in a temporary
// directory, a fresh Postgres database) with the conversation bundle
// published for the default tenant.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	svc    *service.Service
	tenant ident.Tenant
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	engine, err := store.Open(ctx, store.Options{Dir: t.TempDir(), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := engine.Close(); err != nil {
			t.Errorf("close the store: %v", err)
		}
	})
	f := &fixture{t: t, ctx: ctx, svc: service.New(engine, metastore.New(pool, 0, engine), service.Options{})}
	if f.tenant, err = engine.Tenant(ctx, ident.DefaultTenantID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.PublishBundle(ctx, f.tenant, "", registry.ConversationBundle); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) newContext(base uint64) uint64 {
	f.t.Helper()
	h, err := f.svc.CreateContext(f.ctx, f.tenant, base, "test")
	if err != nil {
		f.t.Fatal(err)
	}
	return h.ContextID
}

// say appends a user message to contextID's head.
func (f *fixture) say(contextID uint64, text string) store.AppendResult {
	f.t.Helper()
	res, err := f.svc.AppendJSON(f.ctx, f.tenant, userInput(contextID, text))
	if err != nil {
		f.t.Fatalf("append %q: %v", text, err)
	}
	return res
}

// chain appends n messages to a new context and returns it and the
// turns' ids, oldest first.
func (f *fixture) chain(n int) (uint64, []uint64) {
	f.t.Helper()
	c := f.newContext(0)
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = f.say(c, "message").TurnID
	}
	return c, ids
}

// appendRaw appends payload as it is, declared as typeID and version.
func (f *fixture) appendRaw(contextID uint64, typeID string, version uint32, payload []byte) uint64 {
	f.t.Helper()
	res, err := f.svc.Append(f.ctx, f.tenant, &store.AppendRequest{
		ContextID: contextID, TypeID: typeID, TypeVersion: version, Encoding: 1,
		UncompressedLen: uint32(len(payload)), ContentHash: ident.HashOf(payload), Payload: payload,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return res.TurnID
}

func userInput(contextID uint64, text string) service.JSONAppend {
	data, _ := json.Marshal(map[string]any{"item_type": "user_input", "user_input": map[string]any{"text": text}})
	return service.JSONAppend{ContextID: contextID, TypeID: conversationItem, TypeVersion: conversationVersion, Data: data}
}

// wantKind fails t unless err is an error of kind want.
func wantKind(t *testing.T, err error, want fault.Kind) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", want)
	}
	if got := fault.KindOf(err); got != want {
		t.Fatalf("error %v of kind %v, want %v", err, got, want)
	}
}

// detail returns the named detail of err, a *fault.Error.
func detail(t *testing.T, err error, name string) any {
	t.Helper()
	var fe *fault.Error
	if !errors.As(err, &fe) {
		t.Fatalf("%v (%T) is no *fault.Error", err, err)
	}
	return fe.Details[name]
}

func TestCreateAndForkContexts(t *testing.T) {
	f := newFixture(t)
	_, ids := f.chain(3)
	tests := []struct {
		name      string
		base      uint64
		wantHead  uint64
		wantDepth uint32
		wantErr   fault.Kind
		fails     bool
	}{
		{name: "empty", base: 0, wantHead: 0, wantDepth: 0},
		{name: "fork at the head", base: ids[2], wantHead: ids[2], wantDepth: 3},
		{name: "fork mid-chain", base: ids[0], wantHead: ids[0], wantDepth: 1},
		{name: "fork of an unknown turn", base: ids[2] + 1000, fails: true, wantErr: fault.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := f.svc.CreateContext(f.ctx, f.tenant, tt.base, "test")
			if tt.fails {
				wantKind(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.TurnID != tt.wantHead || h.Depth != tt.wantDepth {
				t.Fatalf("head %+v, want turn %d at depth %d", h, tt.wantHead, tt.wantDepth)
			}
			// A fork shares the chain below its base and grows apart.
			next := f.say(h.ContextID, "on the fork")
			if next.ParentID != tt.base || next.Depth != tt.wantDepth+1 {
				t.Fatalf("first append %+v, want parent %d at depth %d", next, tt.base, tt.wantDepth+1)
			}
		})
	}
}

func TestAppendJSON(t *testing.T) {
	f := newFixture(t)
	c := f.newContext(0)
	withData := func(data string) service.JSONAppend {
		a := userInput(c, "")
		a.Data = json.RawMessage(data)
		return a
	}
	tests := []struct {
		name      string
		append    service.JSONAppend
		wantErr   fault.Kind
		fails     bool
		wantField string // the details' field of an unprocessable append
	}{
		{name: "a registered type", append: userInput(c, "hello")},
		{name: "an unknown context", append: userInput(c+1000, "hello"), fails: true, wantErr: fault.NotFound},
		{name: "an unregistered type", append: service.JSONAppend{ContextID: c, TypeID: "com.example.Nothing", TypeVersion: 1, Data: json.RawMessage(`{}`)},
			fails: true, wantErr: fault.Unprocessable, wantField: "type_id"},
		{name: "an unregistered version", append: service.JSONAppend{ContextID: c, TypeID: conversationItem, TypeVersion: 99, Data: json.RawMessage(`{}`)},
			fails: true, wantErr: fault.Unprocessable, wantField: "type_id"},
		{name: "data not an object", append: withData(`[1,2]`), fails: true, wantErr: fault.Unprocessable, wantField: "data"},
		{name: "a field of the wrong type", append: withData(`{"item_type":"user_input","user_input":{"text":7}}`),
			fails: true, wantErr: fault.Unprocessable, wantField: "data.user_input.text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := f.svc.AppendJSON(f.ctx, f.tenant, tt.append)
			if !tt.fails {
				if err != nil {
					t.Fatal(err)
				}
				if res.TurnID == 0 || res.ContextID != c || res.Replayed {
					t.Fatalf("result %+v", res)
				}
				return
			}
			wantKind(t, err, tt.wantErr)
			if tt.wantField != "" {
				if got := detail(t, err, "field"); got != tt.wantField {
					t.Fatalf("field %v, want %q (%v)", got, tt.wantField, err)
				}
			}
		})
	}
}

func TestIdempotentAppendIsReplayed(t *testing.T) {
	f := newFixture(t)
	c := f.newContext(0)
	a := userInput(c, "once")
	a.IdempotencyKey = "k1"
	first, err := f.svc.AppendJSON(f.ctx, f.tenant, a)
	if err != nil {
		t.Fatal(err)
	}
	f.say(c, "after") // the head moves on; a replay still names the first turn
	again, err := f.svc.AppendJSON(f.ctx, f.tenant, a)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.TurnID != first.TurnID || again.ContentHash != first.ContentHash {
		t.Fatalf("replay %+v, want turn %d replayed", again, first.TurnID)
	}
	if turns, err := f.svc.Last(f.ctx, f.tenant, c, 10, false); err != nil || len(turns) != 2 {
		t.Fatalf("the chain holds %d turns (%v), want 2: the replay appended nothing", len(turns), err)
	}
	// The same key with other data is a conflict, not a replay.
	other := userInput(c, "other")
	other.IdempotencyKey = "k1"
	_, err = f.svc.AppendJSON(f.ctx, f.tenant, other)
	wantKind(t, err, fault.Conflict)
}

func TestConditionalAppend(t *testing.T) {
	f := newFixture(t)
	c, ids := f.chain(2)
	tests := []struct {
		name    string
		parent  uint64
		wantErr bool
	}{
		{name: "on a stale head", parent: ids[0], wantErr: true},
		{name: "on the head", parent: ids[1]},
		{name: "on the old head again", parent: ids[1], wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := userInput(c, tt.name)
			a.ParentTurnID, a.IfHead = tt.parent, true
			res, err := f.svc.AppendJSON(f.ctx, f.tenant, a)
			if tt.wantErr {
				wantKind(t, err, fault.HeadMoved)
				return
			}
			if err != nil || res.ParentID != tt.parent {
				t.Fatalf("append %+v, %v; want it on %d", res, err, tt.parent)
			}
		})
	}
}

func TestLastReturnsTheNewestOldestFirst(t *testing.T) {
	f := newFixture(t)
	c, ids := f.chain(5)
	for _, tt := range []struct {
		limit uint32
		want  []uint64
	}{
		{1, ids[4:]},
		{3, ids[2:]},
		{10, ids},
	} {
		turns, err := f.svc.Last(f.ctx, f.tenant, c, tt.limit, true)
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for _, turn := range turns {
			got = append(got, turn.ID)
			if len(turn.Payload) == 0 {
				t.Errorf("turn %d without its payload", turn.ID)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Last(%d) = %v, want %v", tt.limit, got, tt.want)
		}
	}
}

// turnIDs returns the page's turn ids, oldest first.
func turnIDs(t *testing.T, page *service.TurnPage) []uint64 {
	t.Helper()
	var ids []uint64
	for _, raw := range page.Turns {
		var turn struct {
			TurnID uint64 `json:"turn_id,string"`
		}
		if err := json.Unmarshal(raw, &turn); err != nil {
			t.Fatalf("turn %s: %v", raw, err)
		}
		ids = append(ids, turn.TurnID)
	}
	return ids
}

func TestTurnsPages(t *testing.T) {
	f := newFixture(t)
	c, ids := f.chain(5)
	tests := []struct {
		name                 string
		q                    service.TurnQuery
		want                 []uint64
		wantOlder, wantNewer bool
	}{
		{name: "the newest", q: service.TurnQuery{Limit: 2}, want: ids[3:], wantOlder: true},
		{name: "all of them", q: service.TurnQuery{}, want: ids},
		{name: "before a turn", q: service.TurnQuery{Limit: 2, Before: ids[3]}, want: ids[1:3], wantOlder: true, wantNewer: true},
		{name: "before the second", q: service.TurnQuery{Limit: 2, Before: ids[1]}, want: ids[:1], wantNewer: true},
		{name: "after a turn", q: service.TurnQuery{Limit: 2, After: ids[1]}, want: ids[2:4], wantOlder: true, wantNewer: true},
		{name: "after to the head", q: service.TurnQuery{Limit: 5, After: ids[2]}, want: ids[3:], wantOlder: true},
		{name: "up to a turn", q: service.TurnQuery{UpTo: ids[2]}, want: ids[:3], wantNewer: true},
		{name: "by declared type", q: service.TurnQuery{TypeID: conversationItem, TypeVersion: conversationVersion, Limit: 1}, want: ids[4:], wantOlder: true},
		{name: "by another type", q: service.TurnQuery{TypeID: "com.example.Other"}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := f.svc.Turns(f.ctx, f.tenant, c, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := turnIDs(t, page); !slices.Equal(got, tt.want) {
				t.Fatalf("turns %v, want %v", got, tt.want)
			}
			if page.HasOlder != tt.wantOlder || page.HasNewer != tt.wantNewer {
				t.Fatalf("has older %v, newer %v; want %v, %v", page.HasOlder, page.HasNewer, tt.wantOlder, tt.wantNewer)
			}
			if len(tt.want) > 0 && (page.Oldest != tt.want[0] || page.Newest != tt.want[len(tt.want)-1]) {
				t.Fatalf("oldest %d, newest %d; want %d, %d", page.Oldest, page.Newest, tt.want[0], tt.want[len(tt.want)-1])
			}
		})
	}
}

func TestTurnsRefusesBadQueries(t *testing.T) {
	f := newFixture(t)
	c, ids := f.chain(2)
	_, otherIDs := f.chain(1)
	tests := []struct {
		name      string
		context   uint64
		q         service.TurnQuery
		wantKind  fault.Kind
		wantParam string
	}{
		{name: "an unknown context", context: c + 1000, wantKind: fault.NotFound},
		{name: "over the limit", context: c, q: service.TurnQuery{Limit: service.MaxTurnLimit + 1}, wantKind: fault.Invalid, wantParam: "limit"},
		{name: "both cursors", context: c, q: service.TurnQuery{Before: ids[1], After: ids[0]}, wantKind: fault.Invalid, wantParam: "before_turn_id"},
		{name: "up to and a cursor", context: c, q: service.TurnQuery{UpTo: ids[1], Before: ids[1]}, wantKind: fault.Invalid, wantParam: "up_to_turn_id"},
		{name: "before a turn of another chain", context: c, q: service.TurnQuery{Before: otherIDs[0]}, wantKind: fault.Invalid, wantParam: "before_turn_id"},
		{name: "after a turn of another chain", context: c, q: service.TurnQuery{After: otherIDs[0]}, wantKind: fault.Invalid, wantParam: "cursor"},
		{name: "an explicit hint without a type", context: c, q: service.TurnQuery{Hint: service.HintExplicit}, wantKind: fault.Invalid, wantParam: "as_type_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.Turns(f.ctx, f.tenant, tt.context, tt.q)
			wantKind(t, err, tt.wantKind)
			if tt.wantParam != "" {
				if got := detail(t, err, "parameter"); got != tt.wantParam {
					t.Fatalf("parameter %v, want %q (%v)", got, tt.wantParam, err)
				}
			}
		})
	}
}

// A turn that cannot be projected carries its error in its object; the
// page around it answers.
func TestTypedTurnErrors(t *testing.T) {
	f := newFixture(t)
	c := f.newContext(0)
	good := f.say(c, "typed").TurnID
	unregistered := f.appendRaw(c, "com.example.Unregistered", 1, []byte{0x80})
	undecodable := f.appendRaw(c, conversationItem, conversationVersion, []byte{0xc1}) // 0xc1: never msgpack
	tests := []struct {
		name     string
		q        service.TurnQuery
		turn     uint64
		wantCode string // "" for a typed rendering with data
		wantKeys []string
	}{
		{name: "typed", turn: good, wantKeys: []string{"decoded_as", "data"}},
		{name: "unregistered type", turn: unregistered, wantCode: "TYPE_NOT_REGISTERED"},
		{name: "undecodable payload", turn: undecodable, wantCode: "UNDECODABLE"},
		{name: "explicit hint to an unregistered version", turn: good,
			q:        service.TurnQuery{Hint: service.HintExplicit, AsTypeID: conversationItem, AsVersion: 99, HasAsVer: true},
			wantCode: "TYPE_NOT_REGISTERED"},
		{name: "latest hint", turn: good, q: service.TurnQuery{Hint: service.HintLatest}, wantKeys: []string{"decoded_as", "data"}},
		{name: "raw view of an unregistered type", turn: unregistered, q: service.TurnQuery{View: service.ViewRaw},
			wantKeys: []string{"bytes_b64", "content_hash_b3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.Limit = 10
			page, err := f.svc.Turns(f.ctx, f.tenant, c, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.Index(turnIDs(t, page), tt.turn)
			if i < 0 {
				t.Fatalf("turn %d not on the page", tt.turn)
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(page.Turns[i], &obj); err != nil {
				t.Fatal(err)
			}
			var turnErr struct{ Code string }
			if raw, ok := obj["error"]; ok {
				if err := json.Unmarshal(raw, &turnErr); err != nil {
					t.Fatal(err)
				}
			}
			if turnErr.Code != tt.wantCode {
				t.Fatalf("error code %q, want %q: %s", turnErr.Code, tt.wantCode, page.Turns[i])
			}
			for _, k := range tt.wantKeys {
				if _, ok := obj[k]; !ok {
					t.Errorf("no %q in %s", k, page.Turns[i])
				}
			}
		})
	}
}
