package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store/salvage"
)

// tenantSide is one tenant's data on a running server, written through
// its surfaces with its writer key.
type tenantSide struct {
	id, secret string
	contextID  uint64
	turns      int
}

// sharedBlob is stored by both tenants: one copy in the pack, owned by
// the first (acme), granted to the second.
var sharedBlob = []byte("bytes both tenants store")

// seedTenant writes a context with turns, the shared blob, a card and a
// box, and reads the typed turn page (so the render cache holds it).
func seedTenant(t *testing.T, srv *serverProc, side *tenantSide) {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.binAddr, client.WithClientTag("seed;key="+side.secret))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	side.contextID, side.turns = h.ContextID, 3
	for i := range side.turns {
		payload := append([]byte{0x81, 0x01, 0xa5}, fmt.Sprintf("%s-%d", side.id[:3], i)...)
		if _, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: h.ContextID, TypeID: "t", TypeVersion: 1, Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.PutBlob(ctx, sharedBlob); err != nil {
		t.Fatal(err)
	}
	project := "/projects/" + side.id
	side.do(t, srv, http.MethodPost, project+"/cards", `{"card_id":"c1","content":"hi","metadata":{"type":"agent.thought"}}`, http.StatusCreated)
	side.do(t, srv, http.MethodPut, project+"/boxes/b1", `{"card_ids":["c1"]}`, http.StatusOK)
	side.do(t, srv, http.MethodGet, fmt.Sprintf("/v1/contexts/%d/turns", h.ContextID), "", http.StatusOK)
}

// do sends a request with the tenant's key and checks its status.
func (s *tenantSide) do(t *testing.T, srv *serverProc, method, path, body string, want int) string {
	t.Helper()
	req, _ := http.NewRequest(method, srv.httpURL(path), strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.secret)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s as %s: %d %s, want %d", method, path, s.id, res.StatusCode, b, want)
	}
	return string(b)
}

// gauge reads one of the store's gauges from /metrics.
func gauge(t *testing.T, srv *serverProc, admin *tenantSide, name string) int {
	t.Helper()
	body := admin.do(t, srv, http.MethodGet, "/metrics", "", http.StatusOK)
	m := regexp.MustCompile(`(?m)^` + name + ` (\d+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// tenantRows counts id's rows in every table with a tenant_id but the
// tenants and the audit log.
func tenantRows(t *testing.T, pool *pgxpool.Pool, id string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT c.table_name::text FROM information_schema.columns c
		JOIN information_schema.tables USING (table_schema, table_name)
		WHERE c.table_schema = 'public' AND c.column_name = 'tenant_id' AND table_type = 'BASE TABLE'
		  AND c.table_name NOT IN ('tenants', 'audit_log')`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	out := map[string]int{}
	for _, table := range tables {
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE tenant_id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

// TestHostedTenantDeletion deletes a tenant, as `cardbox tenant delete`
// does from another process, beside a running hosted server: its rows go, its open session is closed, its key refused, the server
// forgets its contexts and turns, and the other tenant is untouched; after
// a restart it stays gone and `cardbox verify` finds no damage.
func TestHostedTenantDeletion(t *testing.T) {
	db, dir := pgtest.NewDB(t), t.TempDir()
	srv := newServer(t, dir, db)
	srv.env = append(srv.env, "CARDBOX_MODE=hosted")
	srv.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	keys := tenancy.New(pool, nil)
	sides := map[string]*tenantSide{}
	for _, id := range []string{"acme", "bravo"} {
		sides[id] = &tenantSide{id: id, secret: seed.TenantKey(t, keys, id, auth.RoleWriter)}
	}
	// /metrics is for operator keys.
	_, opsSecret := seed.OperatorKey(t, keys)
	acme, bravo, ops := sides["acme"], sides["bravo"], &tenantSide{secret: opsSecret}
	seedTenant(t, srv, acme) // first: acme owns the shared blob's record
	seedTenant(t, srv, bravo)
	open := helloed(t, srv.binAddr, acme.secret)
	// bravo's rows are compared after the deletion: its analytics first.
	waitfor.Soon(t, "the projector to write the seeded turns' rows", func() bool {
		var n int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM turn_data WHERE tenant_id IN ('acme', 'bravo')").Scan(&n)
		return err == nil && n == acme.turns+bravo.turns
	})
	bravoBefore := tenantRows(t, pool, "bravo")
	contexts, turns := gauge(t, srv, ops, "cardbox_contexts"), gauge(t, srv, ops, "cardbox_turns")

	d, err := keys.DeleteTenant(ctx, "test", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if d.Total() == 0 {
		t.Fatalf("the deletion removed nothing: %+v", d)
	}
	// The rows go in batches, the deletion's own or, when the server's
	// purge of deleted tenants holds the tenant first, the server's.
	waitfor.Soon(t, "acme's rows to go", func() bool {
		for _, n := range tenantRows(t, pool, "acme") {
			if n != 0 {
				return false
			}
		}
		return true
	})
	checkSessionClosed(t, open)
	waitfor.Soon(t, "the server forgets acme's contexts and turns", func() bool {
		return gauge(t, srv, ops, "cardbox_contexts") == contexts-1 && gauge(t, srv, ops, "cardbox_turns") == turns-acme.turns
	})
	acme.do(t, srv, http.MethodGet, "/v1/contexts", "", http.StatusUnauthorized)
	if f := helloFrame(t, srv.binAddr, acme.secret); f.Type != cxdbcompat.MsgError {
		t.Errorf("HELLO with acme's key after its deletion: %s", f.Type)
	}
	checkBravo(t, srv, bravo)
	if after := tenantRows(t, pool, "bravo"); fmt.Sprint(after) != fmt.Sprint(bravoBefore) {
		t.Errorf("bravo's rows changed: %v, before %v", after, bravoBefore)
	}

	if err := srv.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, srv.log)
	}
	r, err := salvage.Verify(ctx, dir, pool, nil)
	if err != nil || !r.OK() || r.DeletedRecords != acme.turns {
		t.Fatalf("verify after the deletion: %+v, %v", r, err)
	}
	srv.start()
	if got := gauge(t, srv, ops, "cardbox_contexts"); got != contexts-1 {
		t.Errorf("after the restart: %d contexts, want %d", got, contexts-1)
	}
	checkBravo(t, srv, bravo)
}

// checkSessionClosed waits (boundedly) for the server to close conn.
func checkSessionClosed(t *testing.T, conn interface {
	SetReadDeadline(time.Time) error
	Read([]byte) (int, error)
}) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("the deleted tenant's session: read %d bytes, %v; want it closed", n, err)
	}
}

// checkBravo reads everything bravo wrote.
func checkBravo(t *testing.T, srv *serverProc, bravo *tenantSide) {
	t.Helper()
	page := bravo.do(t, srv, http.MethodGet, fmt.Sprintf("/v1/contexts/%d/turns", bravo.contextID), "", http.StatusOK)
	if n := strings.Count(page, `"turn_id"`); n != bravo.turns {
		t.Errorf("bravo's turn page has %d turns, want %d: %s", n, bravo.turns, page)
	}
	bravo.do(t, srv, http.MethodGet, "/projects/bravo/boxes/b1", "", http.StatusOK)
	c, err := client.Dial(context.Background(), srv.binAddr, client.WithClientTag("check;key="+bravo.secret))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := c.GetBlob(context.Background(), hashOf(sharedBlob)); err != nil || string(got) != string(sharedBlob) {
		t.Errorf("bravo's grant to the blob acme stored first: %q, %v", got, err)
	}
}

// helloFrame dials and sends HELLO with secret, returning the answer.
func helloFrame(t *testing.T, addr, secret string) cxdbcompat.Frame {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return call(t, conn, cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientTag: "agent;key=" + secret})
}

func hashOf(b []byte) client.Hash { return blake3.Sum256(b) }
