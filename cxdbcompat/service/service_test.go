package service_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/cxdbcompat/service/servicetest"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

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
	f := servicetest.New(t)
	_, ids := f.Chain(3)
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
			h, err := f.Svc.CreateContext(f.Ctx, f.Tenant, tt.base, "test")
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
			next := f.Say(h.ContextID, "on the fork")
			if next.ParentID != tt.base || next.Depth != tt.wantDepth+1 {
				t.Fatalf("first append %+v, want parent %d at depth %d", next, tt.base, tt.wantDepth+1)
			}
		})
	}
}

func TestAppendJSON(t *testing.T) {
	f := servicetest.New(t)
	c := f.NewContext(0)
	withData := func(data string) service.JSONAppend {
		a := servicetest.UserInput(c, "")
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
		{name: "a registered type", append: servicetest.UserInput(c, "hello")},
		{name: "an unknown context", append: servicetest.UserInput(c+1000, "hello"), fails: true, wantErr: fault.NotFound},
		{name: "an unregistered type", append: service.JSONAppend{ContextID: c, TypeID: "com.example.Nothing", TypeVersion: 1, Data: json.RawMessage(`{}`)},
			fails: true, wantErr: fault.Unprocessable, wantField: "type_id"},
		{name: "an unregistered version", append: service.JSONAppend{ContextID: c, TypeID: servicetest.ConversationItem, TypeVersion: 99, Data: json.RawMessage(`{}`)},
			fails: true, wantErr: fault.Unprocessable, wantField: "type_id"},
		{name: "data not an object", append: withData(`[1,2]`), fails: true, wantErr: fault.Unprocessable, wantField: "data"},
		{name: "a field of the wrong type", append: withData(`{"item_type":"user_input","user_input":{"text":7}}`),
			fails: true, wantErr: fault.Unprocessable, wantField: "data.user_input.text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := f.Svc.AppendJSON(f.Ctx, f.Tenant, tt.append)
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
	f := servicetest.New(t)
	c := f.NewContext(0)
	a := servicetest.UserInput(c, "once")
	a.IdempotencyKey = "k1"
	first, err := f.Svc.AppendJSON(f.Ctx, f.Tenant, a)
	if err != nil {
		t.Fatal(err)
	}
	f.Say(c, "after") // the head moves on; a replay still names the first turn
	again, err := f.Svc.AppendJSON(f.Ctx, f.Tenant, a)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.TurnID != first.TurnID || again.ContentHash != first.ContentHash {
		t.Fatalf("replay %+v, want turn %d replayed", again, first.TurnID)
	}
	if turns, err := f.Svc.Last(f.Ctx, f.Tenant, c, 10, false); err != nil || len(turns) != 2 {
		t.Fatalf("the chain holds %d turns (%v), want 2: the replay appended nothing", len(turns), err)
	}
	// The same key with other data is a conflict, not a replay.
	other := servicetest.UserInput(c, "other")
	other.IdempotencyKey = "k1"
	_, err = f.Svc.AppendJSON(f.Ctx, f.Tenant, other)
	wantKind(t, err, fault.Conflict)
}

func TestConditionalAppend(t *testing.T) {
	f := servicetest.New(t)
	c, ids := f.Chain(2)
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
			a := servicetest.UserInput(c, tt.name)
			a.ParentTurnID, a.IfHead = tt.parent, true
			res, err := f.Svc.AppendJSON(f.Ctx, f.Tenant, a)
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
	f := servicetest.New(t)
	c, ids := f.Chain(5)
	for _, tt := range []struct {
		limit uint32
		want  []uint64
	}{
		{1, ids[4:]},
		{3, ids[2:]},
		{10, ids},
	} {
		turns, err := f.Svc.Last(f.Ctx, f.Tenant, c, tt.limit, true)
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

func TestSelectTurns(t *testing.T) {
	f := servicetest.New(t)
	c, ids := f.Chain(5)
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
		{name: "by declared type", q: service.TurnQuery{TypeID: servicetest.ConversationItem, TypeVersion: servicetest.ConversationVersion, Limit: 1}, want: ids[4:], wantOlder: true},
		{name: "by another type", q: service.TurnQuery{TypeID: "com.example.Other"}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := f.Svc.SelectTurns(f.Ctx, f.Tenant, c, &tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sel.IDs, tt.want) {
				t.Fatalf("turns %v, want %v", sel.IDs, tt.want)
			}
			if sel.HasOlder != tt.wantOlder || sel.HasNewer != tt.wantNewer {
				t.Fatalf("has older %v, newer %v; want %v, %v", sel.HasOlder, sel.HasNewer, tt.wantOlder, tt.wantNewer)
			}
		})
	}
}

func TestSelectTurnsRefusesBadQueries(t *testing.T) {
	f := servicetest.New(t)
	c, ids := f.Chain(2)
	_, otherIDs := f.Chain(1)
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
			_, err := f.Svc.SelectTurns(f.Ctx, f.Tenant, tt.context, &tt.q)
			wantKind(t, err, tt.wantKind)
			if tt.wantParam != "" {
				if got := detail(t, err, "parameter"); got != tt.wantParam {
					t.Fatalf("parameter %v, want %q (%v)", got, tt.wantParam, err)
				}
			}
		})
	}
}
