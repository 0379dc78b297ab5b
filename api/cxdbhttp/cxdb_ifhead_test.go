package cxdbhttp_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
)

// systemItemAppend is an append of a system item with the given extra members.
func systemItemAppend(extra string) string {
	return `{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"system"}` + extra + `}`
}

func TestHTTPConditionalAppend(t *testing.T) {
	h := apitest.NewCXDB(t)
	h.PublishConversationBundle()
	var created struct {
		ContextID string `json:"context_id"`
	}
	h.Call(http.MethodPost, "/v1/contexts/create", nil).Want(t, http.StatusCreated).JSON(t, &created)
	path := "/v1/contexts/" + created.ContextID + "/append"
	type appended struct {
		TurnID       string `json:"turn_id"`
		ParentTurnID string `json:"parent_turn_id"`
		Replayed     bool   `json:"replayed"`
	}
	var first appended
	h.Call(http.MethodPost, path, systemItemAppend(`,"if_head":"0","idempotency_key":"a"`)).Want(t, http.StatusCreated).JSON(t, &first)

	tests := []struct {
		name   string
		extra  string
		status int
		kind   string
		detail string // details.head_turn_id, or details.parameter for 400
	}{
		{"empty context expected, head moved", `,"if_head":"0"`, http.StatusConflict, "HEAD_MOVED", first.TurnID},
		{"retry of the committed append", `,"if_head":0,"idempotency_key":"a"`, http.StatusCreated, "", ""},
		{"parent other than if_head", `,"if_head":"` + first.TurnID + `","parent_turn_id":"999"`, http.StatusBadRequest, "BAD_REQUEST", "parent_turn_id"},
		{"if_head not an id", `,"if_head":"x"`, http.StatusBadRequest, "BAD_REQUEST", ""},
		{"on the head", `,"if_head":` + first.TurnID, http.StatusCreated, "", ""},
		{"on a head that moved on", `,"if_head":"` + first.TurnID + `","parent_turn_id":"` + first.TurnID + `"`, http.StatusConflict, "HEAD_MOVED", ""},
	}
	for _, tc := range tests {
		r := h.Call(http.MethodPost, path, systemItemAppend(tc.extra)).Want(t, tc.status)
		if tc.kind == "" {
			var a appended
			r.JSON(t, &a)
			if strings.Contains(tc.extra, `"idempotency_key":"a"`) && (a.TurnID != first.TurnID || !a.Replayed) {
				t.Errorf("%s: %+v, want turn %s replayed", tc.name, a, first.TurnID)
			}
			if tc.name == "on the head" && a.ParentTurnID != first.TurnID {
				t.Errorf("%s: parent %s, want %s", tc.name, a.ParentTurnID, first.TurnID)
			}
			continue
		}
		e := r.APIError(t)
		if e.Kind != tc.kind {
			t.Errorf("%s: kind %s, want %s (%s)", tc.name, e.Kind, tc.kind, r.Body)
		}
		if tc.kind == "HEAD_MOVED" && tc.detail != "" && e.Details["head_turn_id"] != tc.detail {
			t.Errorf("%s: details %v, want head_turn_id %s", tc.name, e.Details, tc.detail)
		}
		if tc.kind == "BAD_REQUEST" && tc.detail != "" && e.Details["parameter"] != tc.detail {
			t.Errorf("%s: details %v, want parameter %s", tc.name, e.Details, tc.detail)
		}
	}
}

// Conditional appends racing over HTTP for one head: one wins.
func TestHTTPConditionalAppendsRace(t *testing.T) {
	h := apitest.NewCXDB(t)
	h.PublishConversationBundle()
	var created struct {
		ContextID string `json:"context_id"`
	}
	h.Call(http.MethodPost, "/v1/contexts/create", nil).Want(t, http.StatusCreated).JSON(t, &created)
	path := "/v1/contexts/" + created.ContextID + "/append"
	const writers = 6
	statuses := make([]int, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, h.URL+path,
				strings.NewReader(systemItemAppend(fmt.Sprintf(`,"if_head":"0","idempotency_key":"w%d"`, w))))
			if err != nil {
				return
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			res.Body.Close()
			statuses[w] = res.StatusCode
		}()
	}
	wg.Wait()
	slices.Sort(statuses)
	want := append([]int{http.StatusCreated}, slices.Repeat([]int{http.StatusConflict}, writers-1)...)
	if !slices.Equal(statuses, want) {
		t.Fatalf("statuses %v, want one 201 and the rest 409", statuses)
	}
}

func TestHTTPMissingBlobs(t *testing.T) {
	h := apitest.NewCXDB(t)
	c := h.Client()
	stored, _, err := c.PutBlob(context.Background(), []byte("stored"))
	if err != nil {
		t.Fatal(err)
	}
	have, never := hex.EncodeToString(stored[:]), strings.Repeat("ab", 32)
	many := `{"hashes":[` + strings.TrimSuffix(strings.Repeat(`"`+never+`",`, 10001), ",") + `]}`
	tests := []struct {
		name   string
		body   string
		status int
		want   []string // missing; for 400, details.parameter
	}{
		{"some stored", `{"hashes":["` + strings.ToUpper(have) + `","` + never + `"]}`, http.StatusOK, []string{never}},
		{"none asked", `{"hashes":[]}`, http.StatusOK, []string{}},
		{"no hashes member", `{}`, http.StatusBadRequest, []string{"hashes"}},
		{"a bad hash", `{"hashes":["` + have + `","abc"]}`, http.StatusBadRequest, []string{"hashes[1]"}},
		{"too many", many, http.StatusBadRequest, []string{"hashes"}},
		{"unknown member", `{"hashes":[],"x":1}`, http.StatusBadRequest, []string{}},
	}
	for _, tc := range tests {
		r := h.Call(http.MethodPost, "/v1/blobs/missing", tc.body).Want(t, tc.status)
		if tc.status != http.StatusOK {
			if e := r.APIError(t); len(tc.want) > 0 && e.Details["parameter"] != tc.want[0] {
				t.Errorf("%s: details %v, want parameter %s", tc.name, e.Details, tc.want[0])
			}
			continue
		}
		var got struct{ Missing []string }
		r.JSON(t, &got)
		if !slices.Equal(got.Missing, tc.want) {
			t.Errorf("%s: missing %v, want %v", tc.name, got.Missing, tc.want)
		}
	}
	// GET of a blob still routes beside the POST.
	h.Get("/v1/blobs/"+have).Want(t, http.StatusOK)
}
