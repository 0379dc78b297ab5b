package turnpage_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/cxdbcompat/service/servicetest"
	"github.com/cardboxhq/cardbox/cxdbcompat/turnpage"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// turnIDs returns the page's turn ids, oldest first.
func turnIDs(t *testing.T, page *turnpage.Page) []uint64 {
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

// A turn that cannot be projected carries its error in its object; the
// page around it answers.
func TestTypedTurnErrors(t *testing.T) {
	f := servicetest.New(t)
	pages := turnpage.New(f.Svc, 0)
	c := f.NewContext(0)
	good := f.Say(c, "typed").TurnID
	unregistered := f.AppendRaw(c, "com.example.Unregistered", 1, []byte{0x80})
	undecodable := f.AppendRaw(c, servicetest.ConversationItem, servicetest.ConversationVersion, []byte{0xc1}) // 0xc1: never msgpack
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
			q:        service.TurnQuery{Hint: service.HintExplicit, AsTypeID: servicetest.ConversationItem, AsVersion: 99, HasAsVer: true},
			wantCode: "TYPE_NOT_REGISTERED"},
		{name: "latest hint", turn: good, q: service.TurnQuery{Hint: service.HintLatest}, wantKeys: []string{"decoded_as", "data"}},
		{name: "raw view of an unregistered type", turn: unregistered, q: service.TurnQuery{View: service.ViewRaw},
			wantKeys: []string{"bytes_b64", "content_hash_b3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.Limit = 10
			page, err := pages.Turns(f.Ctx, f.Tenant, c, tt.q)
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

// A page's bounds name its first and last turns, and a turn rendered
// once is served again from the cache as the same bytes.
func TestPageBoundsAndCache(t *testing.T) {
	f := servicetest.New(t)
	pages := turnpage.New(f.Svc, 0)
	c, ids := f.Chain(4)
	q := service.TurnQuery{Limit: 2, Before: ids[3]}
	first, err := pages.Turns(f.Ctx, f.Tenant, c, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := turnIDs(t, first); !slices.Equal(got, ids[1:3]) || first.Oldest != ids[1] || first.Newest != ids[2] {
		t.Fatalf("turns %v from %d to %d, want %v", got, first.Oldest, first.Newest, ids[1:3])
	}
	if !first.HasOlder || !first.HasNewer || first.Cut || first.BundleID == "" || first.Context.ContextID != c {
		t.Fatalf("page %+v", first)
	}
	again, err := pages.Turns(f.Ctx, f.Tenant, c, q)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(first.Turns, again.Turns, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
		t.Fatalf("cached page %s differs from %s", again.Turns, first.Turns)
	}
	pages.ForgetTenant(f.Tenant) // the cache forgets; the page renders again, the same
	if third, err := pages.Turns(f.Ctx, f.Tenant, c, q); err != nil || len(third.Turns) != 2 || string(third.Turns[0]) != string(first.Turns[0]) {
		t.Fatalf("after ForgetTenant: %v, %v", third, err)
	}
}
