package database_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/sweep"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/quota"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// managed is cardbox on a database at a URL whose role is an ordinary
// owner, as a managed Postgres gives it (docs/operations.md): the server's
// pool and the CLI's, opened as cmd/internal/database opens them.
type managed struct {
	server, cli *database.DB
	cards       *cardbox.Service
	admin       *tenancy.Admin // over the server's pool (/admin)
	cliKeys     *tenancy.Admin // over the CLI's (cardbox tenant, sql-role)
	url         string
	// super is the test server's superuser, which row-level security does
	// not hold: what the test reads to check, whatever the owner sees.
	super *pgxpool.Pool
}

func newManaged(t *testing.T) *managed {
	t.Helper()
	if pgtest.SuperuserOwner() {
		t.Skip(pgtest.EnvSuperuserOwner + "=1: the databases' owner is a superuser")
	}
	ctx := context.Background()
	_, url := pgtest.NewPoolAndURL(t)
	cfg := &config.Config{DatabaseURL: url, DataDir: t.TempDir()}
	server, err := database.Open(ctx, cfg, database.Options{NameSessions: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(context.Background()) })
	cli, err := database.Open(ctx, cfg, database.Options{Owner: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close(context.Background()) })

	// The owner is what the managed Postgres gave: not superuser,
	// not BYPASSRLS, CREATEROLE.
	var super, bypass, createRole bool
	err = cli.Pool.QueryRow(ctx, `SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles WHERE rolname = current_user`).
		Scan(&super, &bypass, &createRole)
	if err != nil || super || bypass || !createRole {
		t.Fatalf("owner: superuser %v, bypassrls %v, createrole %v (%v); want an ordinary owner with CREATEROLE", super, bypass, createRole, err)
	}
	m := &managed{server: server, cli: cli, url: url, super: pgtest.SuperuserPool(t, pgtest.DBName(url)),
		cards: cardbox.New(server.Pool, cardbox.Options{}), admin: tenancy.New(server.Pool, nil), cliKeys: tenancy.New(cli.Pool, nil)}
	seed.Tenants(t, m.admin, "acme")
	return m
}

func (m *managed) scalar(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := m.super.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func note(id, text string) cardbox.NewCard {
	return cardbox.NewCard{CardID: id, Content: json.RawMessage(fmt.Sprintf(`{"text": %q}`, text)),
		Metadata: json.RawMessage(`{"type": "test.note", "role": "user"}`)}
}

// Every function that runs as the schema's owner (SECURITY DEFINER) acts
// on the tenant's rows when the owner is not a superuser: the card and
// box writes log their bytes (add_cardbox_bytes, by the usage triggers),
// the sweeper folds the log (compact_cardbox_usage), and a card delete
// counts (count_card_changes).
func TestOwnerIsNotSuperuserCardsAndBoxes(t *testing.T) {
	m := newManaged(t)
	ctx := context.Background()
	if _, err := m.cards.AddCards(ctx, "acme", []cardbox.NewCard{note("a", "hello"), note("b", "world")}); err != nil {
		t.Fatalf("add cards: %v", err)
	}
	if _, err := m.cards.SaveBox(ctx, "acme", "box", cardbox.BoxInput{CardIDs: []string{"a"}}); err != nil {
		t.Fatalf("save a box: %v", err)
	}
	if _, err := m.cards.AppendToBox(ctx, "acme", "box", []string{"b"}); err != nil {
		t.Fatalf("append to the box: %v", err)
	}
	logged := m.scalar(t, `SELECT coalesce(sum(bytes), 0) FROM cardbox_usage_log WHERE tenant_id = 'acme'`)
	held := m.scalar(t, `SELECT (SELECT sum(card_bytes(card_id, content, tool_calls, tool_call_id, metadata)) FROM cards WHERE tenant_id = 'acme')
		+ (SELECT sum(box_bytes(box_id, card_ids, parent_ids, metadata)) FROM boxes WHERE tenant_id = 'acme')`)
	if logged == 0 || logged != held {
		t.Fatalf("usage log holds %d bytes of acme's, its cards and boxes %d", logged, held)
	}

	// add_cardbox_bytes as the request role, as the triggers call it.
	if _, err := pgrole.As(m.server.Pool, pgrole.Tenant, "acme").Exec(ctx, `SELECT add_cardbox_bytes('acme', 1)`); err != nil {
		t.Fatalf("add_cardbox_bytes as %s: %v", pgrole.Tenant, err)
	}
	if _, err := pgrole.As(m.server.Pool, pgrole.Tenant, "acme").Exec(ctx, `SELECT add_cardbox_bytes('acme', -1)`); err != nil {
		t.Fatal(err)
	}

	// The card delete counts a change of acme's cards.
	changes := m.scalar(t, `SELECT card_changes FROM tenants WHERE tenant_id = 'acme'`)
	if err := m.cards.DeleteCard(ctx, "acme", "b"); err != nil {
		t.Fatalf("delete a card: %v", err)
	}
	if got := m.scalar(t, `SELECT card_changes FROM tenants WHERE tenant_id = 'acme'`); got != changes+1 {
		t.Fatalf("card_changes after a delete: %d, want %d", got, changes+1)
	}
	if err := m.cards.DeleteBox(ctx, "acme", "box"); err != nil {
		t.Fatalf("delete the box: %v", err)
	}

	// The sweeper purges (a DELETE: count_card_changes again) and folds
	// the log into tenant_usage, as cardbox_sweeper.
	m.cards = cardbox.New(m.server.Pool, cardbox.Options{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	st, err := m.cards.NewSweeper(sweep.Config{DeletedRetention: time.Minute}).Sweep(ctx)
	if err != nil || st.Cards != 1 || st.Boxes != 1 {
		t.Fatalf("sweep: %+v, %v; want one card and one box purged", st, err)
	}
	if got := m.scalar(t, `SELECT card_changes FROM tenants WHERE tenant_id = 'acme'`); got != changes+2 {
		t.Fatalf("card_changes after the purge: %d, want %d", got, changes+2)
	}
	if n := m.scalar(t, `SELECT count(*) FROM cardbox_usage_log`); n != 0 {
		t.Fatalf("usage log after compact_cardbox_usage: %d rows, want none", n)
	}
	left := m.scalar(t, `SELECT card_bytes(card_id, content, tool_calls, tool_call_id, metadata) FROM cards WHERE tenant_id = 'acme'`)
	if got := m.scalar(t, `SELECT cardbox_bytes FROM tenant_usage WHERE tenant_id = 'acme'`); got != left {
		t.Fatalf("tenant_usage after compaction: %d bytes, want %d (card a)", got, left)
	}

}

// Each SECURITY DEFINER function on rows the test server's superuser
// wrote (no trigger of theirs run), so that each shows on its own:
// add_cardbox_bytes logs, compact_cardbox_usage folds the log (it
// returned having folded nothing) and count_card_changes counts a card's
// delete (it raised).
func TestOwnerIsNotSuperuserDefinerFunctions(t *testing.T) {
	m := newManaged(t)
	ctx := context.Background()
	if _, err := m.super.Exec(ctx, `INSERT INTO cardbox_usage_log (tenant_id, bytes) VALUES ('acme', 100), ('acme', 20)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pgrole.As(m.server.Pool, pgrole.Tenant, "acme").Exec(ctx, `SELECT add_cardbox_bytes('acme', 3)`); err != nil {
		t.Errorf("add_cardbox_bytes as %s: %v", pgrole.Tenant, err)
	}
	if _, err := pgrole.As(m.server.Pool, pgrole.Sweeper, "").Exec(ctx, `SELECT compact_cardbox_usage()`); err != nil {
		t.Fatalf("compact_cardbox_usage as %s: %v", pgrole.Sweeper, err)
	}
	if n := m.scalar(t, `SELECT count(*) FROM cardbox_usage_log`); n != 0 {
		t.Errorf("compact_cardbox_usage as %s left %d rows in the usage log", pgrole.Sweeper, n)
	}
	if got := m.scalar(t, `SELECT coalesce((SELECT cardbox_bytes FROM tenant_usage WHERE tenant_id = 'acme'), 0)`); got != 123 {
		t.Errorf("acme's tenant_usage after compaction: %d bytes, want 123", got)
	}

	err := pgx.BeginFunc(ctx, m.super, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica;
			INSERT INTO cards (tenant_id, card_id, content, metadata) VALUES ('acme', 'c', '{}', '{"type": "test.note", "role": "user"}')`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	changes := m.scalar(t, `SELECT card_changes FROM tenants WHERE tenant_id = 'acme'`)
	if err := m.cards.DeleteCard(ctx, "acme", "c"); err != nil {
		t.Fatalf("delete a card (count_card_changes): %v", err)
	}
	if got := m.scalar(t, `SELECT card_changes FROM tenants WHERE tenant_id = 'acme'`); got != changes+1 {
		t.Errorf("card_changes after a delete: %d, want %d", got, changes+1)
	}
}

// lock_card_changes and lock_box_changes lock the tenant's row, as
// migration 00024's lock order needs: a second transaction finds it locked
// FOR NO KEY UPDATE by lock_card_changes (even FOR SHARE waits) and FOR
// KEY SHARE by lock_box_changes (FOR SHARE passes, FOR UPDATE waits).
func TestOwnerIsNotSuperuserDeletionLocks(t *testing.T) {
	m := newManaged(t)
	ctx := context.Background()
	for _, tc := range []struct {
		fn      string
		blocked []string
		passes  []string
	}{
		{"lock_card_changes", []string{"FOR SHARE", "FOR UPDATE"}, nil},
		{"lock_box_changes", []string{"FOR UPDATE"}, []string{"FOR SHARE"}},
	} {
		err := pgx.BeginFunc(ctx, m.server.Pool, func(tx pgx.Tx) error {
			var ok bool
			if err := pgrole.As(tx, pgrole.Tenant, "acme").QueryRow(ctx, "SELECT "+tc.fn+"(ARRAY['acme'])").Scan(&ok); err != nil {
				return err
			}
			for _, lock := range append(tc.blocked, tc.passes...) {
				_, err := m.super.Exec(ctx, `SELECT 1 FROM tenants WHERE tenant_id = 'acme' `+lock+` NOWAIT`)
				var pgErr *pgconn.PgError
				waited := errors.As(err, &pgErr) && pgErr.Code == "55P03"
				if err != nil && !waited {
					return err
				}
				if want := lock != "FOR SHARE" || tc.fn == "lock_card_changes"; waited != want {
					t.Errorf("%s: a second transaction's %s on acme's row waited = %v, want %v", tc.fn, lock, waited, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.fn, err)
		}
	}
}

// A tenant's quota holds its cards and boxes, as Postgres counts them.
func TestOwnerIsNotSuperuserQuota(t *testing.T) {
	m := newManaged(t)
	ctx := context.Background()
	checker := quota.New(quota.Options{RefreshEvery: -1, Lookup: func(ctx context.Context, tenant string) (quota.Setting, error) {
		q, err := m.admin.TenantQuota(ctx, tenant)
		return quota.Setting{Quota: q.Bytes, CardBoxBytes: q.CardBoxBytes}, err
	}})
	s := cardbox.New(m.server.Pool, cardbox.Options{Admit: func(ctx context.Context, project string, adding int64) error {
		return checker.CheckCardBox(ctx, project, 0, adding)
	}})
	if _, err := s.AddCards(ctx, "acme", []cardbox.NewCard{note("a", "first")}); err != nil {
		t.Fatalf("add a card: %v", err)
	}
	q, err := m.admin.TenantQuota(ctx, "acme")
	if err != nil || q.CardBoxBytes == 0 {
		t.Fatalf("acme's card and box bytes: %+v, %v; want its card's", q, err)
	}
	if err := m.cliKeys.SetQuota(ctx, "test", "acme", q.CardBoxBytes+10); err != nil {
		t.Fatalf("set a quota: %v", err)
	}
	_, err = s.AddCards(ctx, "acme", []cardbox.NewCard{note("b", "a card that does not fit in ten bytes")})
	var se *fault.Error
	if !errors.As(err, &se) || se.Kind != fault.QuotaExceeded {
		t.Fatalf("a card over the quota: %v, want refused (quota exceeded)", err)
	}
}

// The CLI's statements as the owner (cardbox sql-role create, tenant
// create --sql-role, tenant delete), and what the analysts' roles read
// through the analytics views.
func TestOwnerIsNotSuperuserSQLRolesAndDeletion(t *testing.T) {
	m := newManaged(t)
	ctx := context.Background()
	role, password, err := m.cliKeys.CreateSQLRole(ctx, "test", "acme", "")
	if err != nil {
		t.Fatalf("cardbox sql-role create --tenant acme: %v", err)
	}
	t.Cleanup(func() {
		m.cli.Pool.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{role.Name}.Sanitize())
	})
	tenant, other, otherPassword, err := m.cliKeys.CreateTenantWithSQLRole(ctx, "test", "initech", "Initech")
	if err != nil {
		t.Fatalf("cardbox tenant create initech --sql-role: %v", err)
	}
	t.Cleanup(func() {
		m.cli.Pool.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{other.Name}.Sanitize())
	})
	if tenant.ID != "initech" || other.TenantID != "initech" {
		t.Fatalf("tenant %+v, SQL role %+v", tenant, other)
	}
	if _, err := m.cards.AddCards(ctx, "acme", []cardbox.NewCard{note("a", "hello"), note("b", "world")}); err != nil {
		t.Fatalf("add cards: %v", err)
	}
	if _, err := m.cards.AddCards(ctx, "initech", []cardbox.NewCard{note("i", "initech's")}); err != nil {
		t.Fatalf("add a card: %v", err)
	}

	// Each analyst reads its own tenant's rows, through the views too.
	for _, tc := range []struct {
		role, password, tenant string
		cards                  int64
	}{{role.Name, password, "acme", 2}, {other.Name, otherPassword, "initech", 1}} {
		conn := m.analyst(t, tc.role, tc.password)
		var tenants, cards, viewCards int64
		err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM tenants), (SELECT count(*) FROM cards),
			(SELECT cards FROM analytics_storage WHERE tenant_id = $1)`, tc.tenant).Scan(&tenants, &cards, &viewCards)
		if err != nil {
			t.Fatalf("%s: %v", tc.role, err)
		}
		if tenants != 1 || cards != tc.cards || viewCards != tc.cards {
			t.Errorf("%s sees %d tenants, %d cards, analytics_storage says %d; want 1, %d, %d",
				tc.role, tenants, cards, viewCards, tc.cards, tc.cards)
		}
	}

	// The CLI deletes acme: every row (cards: count_card_changes and
	// add_cardbox_bytes on a deleted tenant) and its analyst's role.
	d, err := m.cliKeys.DeleteTenant(ctx, "test", "acme")
	if err != nil {
		t.Fatalf("cardbox tenant delete acme: %v", err)
	}
	if len(d.Unremoved) != 0 {
		t.Errorf("SQL roles left: %v", d.Unremoved)
	}
	for _, sql := range []string{
		`SELECT count(*) FROM cards WHERE tenant_id = 'acme'`,
		`SELECT count(*) FROM cardbox_usage_log WHERE tenant_id = 'acme'`,
		`SELECT count(*) FROM sql_roles WHERE tenant_id = 'acme'`,
		`SELECT count(*) FROM pg_roles WHERE rolname = '` + role.Name + `'`,
	} {
		if n := m.scalar(t, sql); n != 0 {
			t.Errorf("after the deletion, %s: %d", sql, n)
		}
	}
	if n := m.scalar(t, `SELECT count(*) FROM tenants WHERE tenant_id = 'acme' AND deleted_at IS NOT NULL`); n != 1 {
		t.Errorf("acme's tombstone: %d rows", n)
	}
	// And the server's /admin path deletes initech (its role stays: only
	// the owner may drop it).
	if _, err := m.admin.DeleteTenant(ctx, "test", "initech"); err != nil {
		t.Fatalf("DELETE /admin/tenants/initech: %v", err)
	}
}

// analyst connects as an analyst's SQL role (the test server trusts its
// socket, else the password is asked).
func (m *managed) analyst(t *testing.T, role, password string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(m.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = role, password
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("log in as %s: %v", role, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
