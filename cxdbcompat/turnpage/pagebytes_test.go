package turnpage_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/projection"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/cxdbcompat/service/servicetest"
	"github.com/cardboxhq/cardbox/cxdbcompat/turnpage"
)

var update = flag.Bool("update", false, "rewrite testdata/pages.golden from the code")

// TestPageBytes pins the bytes of turn pages, in every view and render
// option, against testdata/pages.golden: a change to how turn JSON is
// built must leave them as they are.
func TestPageBytes(t *testing.T) {
	f := servicetest.New(t)
	pages := turnpage.New(f.Svc, 0)
	c := f.NewContext(0)
	f.Say(c, "first")
	item := `{"item_type":"assistant_turn","status":"complete","timestamp":"2026-01-02T03:04:05Z","id":"i2",
		"turn":{"text":"a <b> \"quoted\" é \u2028 reply","turn_number":1,"finish_reason":"tool_use",
			"metrics":{"input_tokens":100,"output_tokens":20,"model":"m-1"},
			"tool_calls":[{"id":"c1","name":"read_file","args":"{}","status":"complete","duration_ms":12,"result":{"content":"hello","success":true}}]}}`
	a := servicetest.UserInput(c, "")
	a.Data = json.RawMessage(item)
	f.AppendJSON(a)
	f.AppendRaw(c, "com.example.Unregistered", 1, []byte{0x81, 0x01, 0xa1, 'x'})
	f.AppendRaw(c, servicetest.ConversationItem, servicetest.ConversationVersion, []byte{0xc1})
	f.AppendRaw(c, servicetest.ConversationItem, servicetest.ConversationVersion, []byte{0x82, 0x01, 0xa4, 's', 'o', 'm', 'e', 0x63, 0x07}) // an unknown tag

	queries := []struct {
		name string
		q    service.TurnQuery
	}{
		{"typed", service.TurnQuery{}},
		{"raw", service.TurnQuery{View: service.ViewRaw}},
		{"both", service.TurnQuery{View: service.ViewBoth}},
		{"base fields only", service.TurnQuery{View: "none"}},
		{"hex", service.TurnQuery{View: service.ViewBoth, Render: projection.Options{Bytes: "hex"}}},
		{"len_only", service.TurnQuery{View: service.ViewBoth, Render: projection.Options{Bytes: "len_only"}}},
		{"numbers", service.TurnQuery{Render: projection.Options{U64: "number", Enum: "both", Time: "unix_ms"}}},
		{"unknown", service.TurnQuery{Render: projection.Options{IncludeUnknown: true}}},
		{"latest", service.TurnQuery{Hint: service.HintLatest}},
		{"explicit", service.TurnQuery{Hint: service.HintExplicit, AsTypeID: servicetest.ConversationItem, AsVersion: 2, HasAsVer: true}},
		{"two newest", service.TurnQuery{Limit: 2}},
	}
	var got bytes.Buffer
	for _, tt := range queries {
		// Twice: the second page is served from the rendered-turn cache.
		for _, pass := range []string{"rendered", "cached"} {
			page, err := pages.Turns(f.Ctx, f.Tenant, c, tt.q)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			fmt.Fprintf(&got, "## %s (%s) older=%v newer=%v cut=%v bundle=%q\n", tt.name, pass, page.HasOlder, page.HasNewer, page.Cut, page.BundleID)
			for _, turn := range page.Turns {
				fmt.Fprintf(&got, "%s\n", turn)
			}
		}
	}
	golden := filepath.Join("testdata", "pages.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("page bytes differ from %s:\n%s", golden, got.Bytes())
	}
}
