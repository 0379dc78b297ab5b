package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// Postgres's disk full under the HTTP surface: the turns and cards tables
// live on a small tmpfs, which the test fills. A CXDB append and a card
// write are both 507 with kind DISK_FULL (a CXDB append was 500), and
// both work again once space is freed.
func TestPostgresFullDiskIsHTTP507(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPoolAndURL(t)
	dir := pgtest.SmallDisk(t, pgtest.DBName(url), 4<<20, "turns", "cards")
	cx := apitest.NewCXDBWith(t, apitest.Options{Pool: pool})
	cx.PublishConversationBundle()
	cards := apitest.CardBoxOf(cx)
	var created map[string]any
	cx.Call(http.MethodPost, "/v1/contexts/create", `{"base_turn_id":"0"}`).Want(t, http.StatusCreated).JSON(t, &created)
	appendPath := "/v1/contexts/" + created["context_id"].(string) + "/append"
	turn := func(i int) string {
		return fmt.Sprintf(`{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"user_input","user_input":{"text":"turn %d"}}}`, i)
	}

	free := pgtest.FillDisk(t, dir)
	var full apitest.Response
	for i := 0; ; i++ {
		if i > 10_000 {
			t.Fatal("Postgres's disk never filled up")
		}
		if full = cx.Call(http.MethodPost, appendPath, turn(i)); full.Status != http.StatusCreated {
			break
		}
	}
	e := full.Want(t, http.StatusInsufficientStorage).APIError(t)
	if e.Kind != "DISK_FULL" || !strings.Contains(e.Message, "Postgres's disk is full") {
		t.Fatalf("a CXDB append on Postgres's full disk: %+v", e)
	}
	var c api.Error
	for i := 0; ; i++ {
		if i > 10_000 {
			t.Fatal("Postgres's disk never refused a card")
		}
		r := cards.Do(http.MethodPost, "/projects/p/cards", apitest.Card(fmt.Sprintf("c%d", i), "task.instruction", "hello"))
		if r.Status != http.StatusCreated {
			c = r.Want(t, http.StatusInsufficientStorage).APIError(t)
			break
		}
	}
	if c.Kind != "DISK_FULL" {
		t.Fatalf("a card write on Postgres's full disk: %+v", c)
	}

	free()
	cx.Call(http.MethodPost, appendPath, turn(-1)).Want(t, http.StatusCreated)
	cards.Do(http.MethodPost, "/projects/p/cards", apitest.Card("after", "task.instruction", "hello")).Want(t, http.StatusCreated)
}

// Postgres errors no domain mapper claims take their status from
// internal/pgerr's classes (api.ErrorOf), and the turn store's kinds
// from the same classes (fault.Wrap): one table.
func TestPostgresErrorStatuses(t *testing.T) {
	for _, tt := range []struct {
		code, severity string
		status         int
		kind           string
	}{
		{"53100", "ERROR", 507, "DISK_FULL"},
		{"53100", "PANIC", 507, "DISK_FULL"},
		{"53200", "ERROR", 503, "UNAVAILABLE"},
		{"53300", "FATAL", 503, "UNAVAILABLE"},
		{"57P01", "FATAL", 503, "UNAVAILABLE"},
		{"58030", "PANIC", 503, "UNAVAILABLE"},
		{"42601", "ERROR", 500, "INTERNAL"},
	} {
		err := fmt.Errorf("add cards: %w", &pgconn.PgError{Severity: tt.severity, SeverityUnlocalized: tt.severity, Code: tt.code})
		got := api.ErrorOf(err)
		if got.Status != tt.status || got.Kind != tt.kind {
			t.Errorf("%s %s: %+v, want %d %s", tt.severity, tt.code, got, tt.status, tt.kind)
		}
	}
	// The store's kind for a full disk is the same status and kind.
	if e := api.ErrorOf(&fault.Error{Kind: fault.DiskFull, Message: "m"}); e.Status != 507 || e.Kind != "DISK_FULL" {
		t.Errorf("store's full disk: %+v", e)
	}
}
