package cardbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/answer"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// boxJSON is a box's JSON as the API writes it.
func boxJSON(t *testing.T, b cardbox.Box) int64 {
	t.Helper()
	js, err := json.Marshal(map[string]any{
		"box_id": b.BoxID, "card_ids": b.CardIDs, "project_id": b.ProjectID, "parent_ids": b.ParentIDs,
		"metadata": b.Metadata, "created_at": b.CreatedAt.UTC(), "updated_at": b.UpdatedAt.UTC(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(js) + 1)
}

// TestSingleBoxesAreMeasuredBeforeTheyAreLoaded: LoadBoxWithin asks room
// for at least the box's JSON before it loads it, and fails with room's
// refusal; what a save or an append of a box is charged before it is
// written is at least the box's JSON, whatever its ids and metadata
// escape to.
func TestSingleBoxesAreMeasuredBeforeTheyAreLoaded(t *testing.T) {
	svc := cardbox.New(pgtest.Tx(t), cardbox.Options{})
	ctx := context.Background()
	const project = `p<&>"`
	// Ids without quotes or backslashes: LiveBoxSizes counts those one
	// byte, not two (the answer charges the difference once rendered).
	ids := []string{`c<&>`, "c\u00e9", strings.Repeat(`&`, 200)}
	for _, id := range ids {
		if _, err := svc.AddCards(ctx, project, []cardbox.NewCard{{CardID: id, Content: json.RawMessage(`"x"`), Metadata: json.RawMessage(`{"type":"task.instruction"}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	in := cardbox.BoxInput{
		CardIDs:   append(append([]string{}, ids...), ids...),
		ParentIDs: []string{`b<>"`},
		Metadata:  json.RawMessage(`{ "note" : "<&> \u2028 \"q\"", "n": [1, 2, {"x": "&&&"}] }`),
	}
	saved, err := svc.SaveBox(ctx, project, `b<&>"`, in)
	if err != nil {
		t.Fatal(err)
	}
	if n, want := answer.BoxInputJSONSize(project, saved.BoxID, in.CardIDs, in.ParentIDs, in.Metadata), boxJSON(t, saved); n < want {
		t.Errorf("a save charged %d bytes, under the box's %d", n, want)
	}
	created, err := svc.CreateBox(ctx, project, in)
	if err != nil {
		t.Fatal(err)
	}
	if n, want := answer.BoxInputJSONSize(project, "", in.CardIDs, in.ParentIDs, in.Metadata), boxJSON(t, created); n < want {
		t.Errorf("a creation charged %d bytes, under the box's %d", n, want)
	}

	var asked []int64
	box, err := svc.LoadBoxWithin(ctx, project, saved.BoxID, func(n int64) error { asked = append(asked, n); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if want := boxJSON(t, box); len(asked) != 1 || asked[0] < want {
		t.Errorf("room asked for %v, want once at least the box's %d bytes", asked, want)
	}
	refused := errors.New("no room")
	if _, err := svc.LoadBoxWithin(ctx, project, saved.BoxID, func(int64) error { return refused }); !errors.Is(err, refused) {
		t.Errorf("a refusing room: %v, want its error", err)
	}

	size, live, err := svc.BoxJSONSize(ctx, project, saved.BoxID)
	if err != nil || !live {
		t.Fatalf("measure: %d, %v, %v", size, live, err)
	}
	charged := answer.AppendedBoxJSONSize(size, ids)
	if _, err := svc.AppendToBox(ctx, project, saved.BoxID, ids); err != nil {
		t.Fatal(err)
	}
	appended, err := svc.LoadBox(ctx, project, saved.BoxID)
	if err != nil {
		t.Fatal(err)
	}
	if want := boxJSON(t, appended); charged < want {
		t.Errorf("an append charged %d bytes, under the box's %d", charged, want)
	}
	if _, live, err := svc.BoxJSONSize(ctx, project, "nope"); err != nil || live {
		t.Errorf("an absent box: live %v, %v", live, err)
	}
}
