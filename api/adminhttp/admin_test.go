package adminhttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/adminhttp"
	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgfreeze"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/ratelimit"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

func TestAdminAPI(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	keys, checker := tenancy.New(pool, nil), auth.NewKeys(pool, nil)
	seed.Tenants(t, keys, "ops")
	_, adminKey := seed.OperatorKey(t, keys)
	_, writerKey := seed.Key(t, keys, "ops", auth.RoleWriter)
	srv := httptest.NewServer(api.New(api.Options{Auth: checker, Routes: []api.Routes{adminhttp.New(keys)}}))
	t.Cleanup(srv.Close)
	h := &apitest.CXDB{T: t, URL: srv.URL}
	as := func(key string) []string { return []string{"Authorization", "Bearer " + key} }

	h.Call(http.MethodPost, "/admin/tenants", `{"tenant_id":"acme","name":"Acme"}`).Want(t, http.StatusUnauthorized)
	h.Call(http.MethodPost, "/admin/tenants", `{"tenant_id":"acme","name":"Acme"}`, as(writerKey)...).Want(t, http.StatusForbidden)
	h.Call(http.MethodPost, "/admin/tenants", `{"tenant_id":"acme","name":"Acme"}`, as(adminKey)...).Want(t, http.StatusCreated)
	h.Call(http.MethodPost, "/admin/tenants", `{"tenant_id":"acme"}`, as(adminKey)...).Want(t, http.StatusConflict)
	h.Call(http.MethodPost, "/admin/tenants", `{"tenant_id":"a b"}`, as(adminKey)...).Want(t, http.StatusBadRequest)
	h.Call(http.MethodPost, "/admin/keys", `{"tenant_id":"acme","role":"root"}`, as(adminKey)...).Want(t, http.StatusBadRequest)
	h.Call(http.MethodPost, "/admin/keys", `{"tenant_id":"nobody","role":"reader"}`, as(adminKey)...).Want(t, http.StatusNotFound)

	var created struct {
		Key    tenancy.Key `json:"key"`
		Secret string      `json:"secret"`
	}
	h.Call(http.MethodPost, "/admin/keys", `{"tenant_id":"acme","role":"reader"}`, as(adminKey)...).Want(t, http.StatusCreated).JSON(t, &created)
	if p, err := checker.Authenticate(ctx, created.Secret); err != nil || p.Tenant.ID != "acme" || p.Role != auth.RoleReader {
		t.Fatalf("the created key: %+v, %v", p, err)
	}
	var listed struct {
		Keys []tenancy.Key `json:"keys"`
	}
	body := h.Get("/admin/keys?tenant_id=acme", as(adminKey)...).Want(t, http.StatusOK)
	body.JSON(t, &listed)
	if len(listed.Keys) != 1 || listed.Keys[0].ID != created.Key.ID || strings.Contains(string(body.Body), created.Secret) {
		t.Fatalf("keys = %s", body.Body)
	}
	var revoked tenancy.Key
	h.Call(http.MethodDelete, "/admin/keys/"+created.Key.ID, nil, as(adminKey)...).Want(t, http.StatusOK).JSON(t, &revoked)
	if revoked.ID != created.Key.ID || revoked.Role != auth.RoleReader || revoked.TenantID != "acme" || revoked.CreatedAt.IsZero() || revoked.RevokedAt == nil {
		t.Errorf("the revoked key answered as %+v", revoked)
	}
	h.Call(http.MethodDelete, "/admin/keys/"+created.Key.ID, nil, as(adminKey)...).Want(t, http.StatusNotFound)
	if _, err := checker.Authenticate(ctx, created.Secret); err == nil {
		t.Fatal("revoked over HTTP, still valid")
	}
	var audit struct {
		Entries []tenancy.AuditEntry `json:"entries"`
	}
	h.Get("/admin/audit?tenant_id=acme", as(adminKey)...).Want(t, http.StatusOK).JSON(t, &audit)
	var actions []string
	for _, e := range audit.Entries {
		actions = append(actions, e.Action+" by "+e.Actor[:4])
	}
	if got := strings.Join(actions, ", "); got != "key.revoke by key:, key.create by key:, tenant.create by key:" {
		t.Errorf("audit = %s", got)
	}
}

// DELETE /admin/tenants/{id}: operator keys only; 204, then 404 as for a
// tenant that never existed; the default tenant is refused (409); the
// deleted tenant's keys stop working, and its id cannot be created again.
func TestAdminDeletesTenants(t *testing.T) {
	pool := pgtest.NewPool(t)
	keys, checker := tenancy.New(pool, nil), auth.NewKeys(pool, nil)
	seed.Tenants(t, keys, "ops", "acme")
	_, adminKey := seed.OperatorKey(t, keys)
	_, opsAdminKey := seed.Key(t, keys, "ops", auth.RoleAdmin)
	_, writerKey := seed.Key(t, keys, "ops", auth.RoleWriter)
	_, acmeKey := seed.Key(t, keys, "acme", auth.RoleWriter)
	srv := httptest.NewServer(api.New(api.Options{Auth: checker, Routes: []api.Routes{adminhttp.New(keys)}}))
	t.Cleanup(srv.Close)
	h := &apitest.CXDB{T: t, URL: srv.URL}
	as := func(key string) []string { return []string{"Authorization", "Bearer " + key} }

	for _, c := range []struct {
		path string
		key  string
		want int
	}{
		{"/admin/tenants/acme", "", http.StatusUnauthorized},
		{"/admin/tenants/acme", writerKey, http.StatusForbidden},
		{"/admin/tenants/acme", acmeKey, http.StatusForbidden},
		{"/admin/tenants/ops", opsAdminKey, http.StatusForbidden}, // a tenant's admin deletes no tenant, not even its own
		{"/admin/tenants/default", adminKey, http.StatusConflict},
		{"/admin/tenants/nobody", adminKey, http.StatusNotFound},
		{"/admin/tenants/acme", adminKey, http.StatusNoContent},
		{"/admin/tenants/acme", adminKey, http.StatusNotFound},
		{"/admin/tenants/acme", acmeKey, http.StatusUnauthorized},
	} {
		var headers []string
		if c.key != "" {
			headers = as(c.key)
		}
		h.Call(http.MethodDelete, c.path, nil, headers...).Want(t, c.want)
	}
	h.Call(http.MethodPost, "/admin/tenants", `{"tenant_id":"acme"}`, as(adminKey)...).Want(t, http.StatusConflict)
	var audit struct {
		Entries []tenancy.AuditEntry `json:"entries"`
	}
	h.Get("/admin/audit?tenant_id=acme&limit=1", as(adminKey)...).Want(t, http.StatusOK).JSON(t, &audit)
	var detail struct {
		Rows map[string]int `json:"rows"`
	}
	if len(audit.Entries) != 1 || audit.Entries[0].Action != "tenant.delete" {
		t.Fatalf("audit = %+v", audit.Entries)
	}
	if err := json.Unmarshal(audit.Entries[0].Detail, &detail); err != nil || detail.Rows["api_keys"] != 1 {
		t.Errorf("the deletion's audit detail: %s", audit.Entries[0].Detail)
	}
}

func TestRateLimitedRequestsGet429WithRetryAfter(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	keys, checker := tenancy.New(pool, nil), auth.NewKeys(pool, nil)
	seed.Tenants(t, keys, "acme", "globex")
	_, acme := seed.Key(t, keys, "acme", auth.RoleAdmin)
	_, globex := seed.Key(t, keys, "globex", auth.RoleAdmin)
	if err := keys.SetRate(ctx, "test", "acme", tenancy.Rate{PerSec: 0.001, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	limiter := ratelimit.New(ratelimit.Rate{PerSec: 1000, Burst: 1000}, func(ctx context.Context, tenant string) (ratelimit.Rate, error) {
		r, err := keys.TenantRate(ctx, tenant)
		return ratelimit.Rate{PerSec: r.PerSec, Burst: r.Burst}, err
	})
	srv := httptest.NewServer(api.New(api.Options{Auth: checker, Limit: limiter.Allow, Routes: []api.Routes{adminhttp.New(keys)}}))
	t.Cleanup(srv.Close)
	h := &apitest.CXDB{T: t, URL: srv.URL}
	for range 2 {
		h.Get("/admin/tenants", "Authorization", "Bearer "+acme).Want(t, http.StatusOK)
	}
	res := h.Get("/admin/tenants", "Authorization", "Bearer "+acme).Want(t, http.StatusTooManyRequests)
	if e := res.APIError(t); e.Kind != "RATE_LIMITED" || res.Header.Get("Retry-After") == "" {
		t.Errorf("429 = %+v, Retry-After %q", e, res.Header.Get("Retry-After"))
	}
	// Another tenant is not held back by acme's limit.
	h.Get("/admin/tenants", "Authorization", "Bearer "+globex).Want(t, http.StatusOK)
}

// An event stream authenticated with a key that is revoked later ends at
// its next heartbeat; a stream of another key goes on.
func TestEventStreamsOfARevokedKeyEnd(t *testing.T) {
	ctx := context.Background()
	h := apitest.NewCXDBWith(t, apitest.Options{Hosted: true, Heartbeat: 20 * time.Millisecond})
	seed.Tenants(t, h.Keys, "acme")
	revoked, revokedSecret := seed.Key(t, h.Keys, "acme", auth.RoleReader)
	_, keptSecret := seed.Key(t, h.Keys, "acme", auth.RoleReader)
	gone := h.Events("", "Authorization", "Bearer "+revokedSecret)
	kept := h.Events("", "Authorization", "Bearer "+keptSecret)
	gone.Until("connected")
	kept.Until("connected")
	if _, err := h.Keys.RevokeKey(ctx, "test", revoked.ID); err != nil {
		t.Fatal(err)
	}
	ended := make(chan bool, 1)
	go func() {
		gone.Drain()
		ended <- true
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked key's event stream still runs 10 s after the revocation")
	}
	// The other key's stream still delivers: a context created now shows.
	_, writer := seed.Key(t, h.Keys, "acme", auth.RoleWriter)
	h.Call(http.MethodPost, "/v1/contexts/create", `{"base_turn_id":"0"}`, "Authorization", "Bearer "+writer).Want(t, http.StatusCreated)
	kept.Until("context_created")
}

// An administration write that Postgres does not answer (here: the
// tenant's row held by another transaction, as a stalled Postgres would
// hold it) is 503 once the bound passes, not a request that waits for as
// long as the stall lasts (a tenant's deletion: TestTenantDeletionIsBounded).
func TestAdminWritesAreBounded(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	const bound = 300 * time.Millisecond
	keys, checker := tenancy.New(pool, nil).Bound(bound), auth.NewKeys(pool, nil).Bound(bound)
	seed.Tenants(t, keys, "acme")
	_, op := seed.OperatorKey(t, keys)
	srv := httptest.NewServer(api.New(api.Options{Auth: checker, Routes: []api.Routes{adminhttp.New(keys)}}))
	t.Cleanup(srv.Close)
	h := &apitest.CXDB{T: t, URL: srv.URL}
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Rollback(ctx) })
	if _, err := hold.Exec(ctx, `SELECT 1 FROM tenants WHERE tenant_id = 'acme' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/admin/keys", `{"tenant_id":"acme","role":"writer"}`},
		{http.MethodPut, "/admin/tenants/acme/quota", `{"bytes":1000}`},
		{http.MethodPut, "/admin/tenants/acme/rate", `{"per_sec":5,"burst":10}`},
	} {
		res := h.Call(c.method, c.path, c.body, "Authorization", "Bearer "+op).Want(t, http.StatusServiceUnavailable)
		if e := res.APIError(t); e.Kind != "UNAVAILABLE" {
			t.Errorf("%s %s: %+v", c.method, c.path, e)
		}
	}
	// Once the row is free the same writes go through.
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	h.Call(http.MethodPost, "/admin/keys", `{"tenant_id":"acme","role":"writer"}`, "Authorization", "Bearer "+op).Want(t, http.StatusCreated)
}

// operatorOnly lets in one operator key without asking Postgres, so that
// a frozen Postgres stalls the administration itself, not the key check.
type operatorOnly string

func (o operatorOnly) Authenticate(_ context.Context, secret string) (auth.Principal, error) {
	if secret != string(o) {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return auth.Principal{KeyID: "op", Role: auth.RoleOperator}, nil
}

// boundedDelete sends DELETE path as the operator and fails the test
// unless it is answered within limit; it returns the answer.
func boundedDelete(t *testing.T, url, path, secret string, limit time.Duration) (status int, retryAfter string, took time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("DELETE %s: no answer within %v: %v", path, limit, err)
	}
	defer res.Body.Close()
	return res.StatusCode, res.Header.Get("Retry-After"), time.Since(start)
}

// tenantDeletions counts the audit log's records of tenant id's deletion.
func tenantDeletions(t *testing.T, keys *tenancy.Admin, id string) int {
	t.Helper()
	entries, err := keys.Audit(context.Background(), id, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Action == "tenant.delete" {
			n++
		}
	}
	return n
}

// keyRows counts tenant id's rows of api_keys.
func keyRows(t *testing.T, pool *pgxpool.Pool, id string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM api_keys WHERE tenant_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A tenant's deletion is bounded like every administration write: when
// Postgres stops answering, DELETE answers 503 with Retry-After within
// the bound, and leaves either nothing changed or a deleted tenant whose
// rows a retry removes; the audit log records the deletion once.
func TestTenantDeletionIsBounded(t *testing.T) {
	ctx := context.Background()
	cluster := pgfreeze.NewCluster(t)
	pool, err := pgxpool.New(ctx, cluster.NewDB(t, "tenantdelete"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	const bound = 300 * time.Millisecond
	const limit = bound + 1500*time.Millisecond
	keys := tenancy.New(pool, nil).Bound(bound)
	for _, id := range []string{"acme", "bravo"} {
		seed.Tenants(t, keys, id)
		for range 3 {
			seed.Key(t, keys, id, auth.RoleWriter)
		}
	}
	const op = "operator-secret"
	srv := httptest.NewServer(api.New(api.Options{Auth: operatorOnly(op), Routes: []api.Routes{adminhttp.New(keys)}}))
	t.Cleanup(srv.Close)

	// Postgres stops answering before the deletion commits: 503 in time,
	// and nothing changed.
	frozen := pgfreeze.Freeze(t, cluster.PGData())
	status, retryAfter, took := boundedDelete(t, srv.URL, "/admin/tenants/acme", op, limit)
	if status != http.StatusServiceUnavailable || retryAfter == "" {
		t.Fatalf("DELETE with Postgres frozen: %d (Retry-After %q) after %v; want 503 with Retry-After", status, retryAfter, took)
	}
	frozen.Thaw()
	waitfor.True(t, "Postgres answers after the thaw", 10*time.Second, func() bool { return pool.Ping(ctx) == nil })
	if n := keyRows(t, pool, "acme"); n != 3 || tenantDeletions(t, keys, "acme") != 0 {
		t.Fatalf("after a deletion cut short before its commit: %d keys of acme, %d deletions audited; want 3 and 0",
			n, tenantDeletions(t, keys, "acme"))
	}
	if status, _, _ := boundedDelete(t, srv.URL, "/admin/tenants/acme", op, limit); status != http.StatusNoContent {
		t.Fatalf("DELETE again once Postgres answers: %d, want 204", status)
	}
	if n := keyRows(t, pool, "acme"); n != 0 || tenantDeletions(t, keys, "acme") != 1 {
		t.Fatalf("after the deletion: %d keys of acme, %d deletions audited; want 0 and 1", n, tenantDeletions(t, keys, "acme"))
	}

	// Postgres stops answering the removal of the rows (here: one of
	// bravo's keys held by another transaction, as a stall holds it),
	// after the deletion committed: 503 in time; bravo is deleted, and
	// deleting it again removes the rest.
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Rollback(ctx) })
	if _, err := hold.Exec(ctx, `SELECT 1 FROM api_keys WHERE tenant_id = 'bravo' LIMIT 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	status, retryAfter, took = boundedDelete(t, srv.URL, "/admin/tenants/bravo", op, limit)
	if status != http.StatusServiceUnavailable || retryAfter == "" {
		t.Fatalf("DELETE with a row held: %d (Retry-After %q) after %v; want 503 with Retry-After", status, retryAfter, took)
	}
	live, err := keys.ListTenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range live {
		if tenant.ID == "bravo" {
			t.Fatalf("bravo is live after its deletion was cut short: %+v", live)
		}
	}
	if n := keyRows(t, pool, "bravo"); n == 0 || tenantDeletions(t, keys, "bravo") != 1 {
		t.Fatalf("bravo's deletion cut short: %d keys left, %d deletions audited; want some and 1", n, tenantDeletions(t, keys, "bravo"))
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := boundedDelete(t, srv.URL, "/admin/tenants/bravo", op, limit); status != http.StatusNotFound {
		t.Fatalf("DELETE of the deleted bravo: %d, want 404", status)
	}
	if n := keyRows(t, pool, "bravo"); n != 0 || tenantDeletions(t, keys, "bravo") != 1 {
		t.Fatalf("after bravo's deletion was finished: %d keys left, %d deletions audited; want 0 and 1", n, tenantDeletions(t, keys, "bravo"))
	}
}

// Operators set retention policies over HTTP: a duration that does not
// parse, is negative or zero is 400 naming its field; an unknown tenant
// 404; a writer key 403; neither duration removes the label's policy.
func TestAdminSetsRetention(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	keys, checker := tenancy.New(pool, nil), auth.NewKeys(pool, nil)
	if _, err := keys.CreateTenant(ctx, "test", "acme", ""); err != nil {
		t.Fatal(err)
	}
	_, operatorKey, err := keys.CreateOperatorKey(ctx, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, writerKey, _ := keys.CreateKey(ctx, "test", "acme", auth.RoleWriter, nil)
	srv := httptest.NewServer(api.New(api.Options{Auth: checker, Routes: []api.Routes{adminhttp.New(keys)}}))
	t.Cleanup(srv.Close)
	h := &apitest.CXDB{T: t, URL: srv.URL}
	as := func(key string) []string { return []string{"Authorization", "Bearer " + key} }

	for _, tt := range []struct {
		tenant, body, key string
		status            int
		field             string // the error's details.field
	}{
		{"acme", `{"idle":"30d"}`, operatorKey, http.StatusOK, ""},
		{"acme", `{"label":"scratch","idle":"90m","max_age":"48h"}`, operatorKey, http.StatusOK, ""},
		{"acme", `{"idle":"-1h"}`, operatorKey, http.StatusBadRequest, "idle"},
		{"acme", `{"idle":"0s"}`, operatorKey, http.StatusBadRequest, "idle"},
		{"acme", `{"max_age":"soon"}`, operatorKey, http.StatusBadRequest, "max_age"},
		{"acme", `{"max_age":"0d"}`, operatorKey, http.StatusBadRequest, "max_age"},
		{"acme", `{"idle":30}`, operatorKey, http.StatusBadRequest, ""},
		{"nobody", `{"idle":"1h"}`, operatorKey, http.StatusNotFound, ""},
		{"acme", `{"idle":"1h"}`, writerKey, http.StatusForbidden, ""},
		{"acme", `{"label":"scratch"}`, operatorKey, http.StatusNoContent, ""},
	} {
		res := h.Call(http.MethodPut, "/admin/tenants/"+tt.tenant+"/retention", tt.body, as(tt.key)...).Want(t, tt.status)
		if tt.field != "" {
			var e struct {
				Error struct {
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			res.JSON(t, &e)
			if e.Error.Details["field"] != tt.field {
				t.Errorf("PUT %s: details %v, want field %q", tt.body, e.Error.Details, tt.field)
			}
		}
	}
	var listed struct {
		Policies []struct {
			Label       string `json:"label"`
			IdleSeconds *int64 `json:"idle_seconds"`
		} `json:"policies"`
	}
	h.Get("/admin/tenants/acme/retention", as(operatorKey)...).Want(t, http.StatusOK).JSON(t, &listed)
	if len(listed.Policies) != 1 || listed.Policies[0].Label != "" || listed.Policies[0].IdleSeconds == nil || *listed.Policies[0].IdleSeconds != 30*24*3600 {
		t.Errorf("policies of acme: %+v, want the tenant's idle 30 days alone", listed.Policies)
	}
	var audit struct {
		Entries []tenancy.AuditEntry `json:"entries"`
	}
	h.Get("/admin/audit?tenant_id=acme", as(operatorKey)...).Want(t, http.StatusOK).JSON(t, &audit)
	changes := 0
	for _, e := range audit.Entries {
		if strings.HasPrefix(e.Action, "tenant.retention") {
			changes++
		}
	}
	if changes != 3 {
		t.Errorf("%d retention changes audited, want 3", changes)
	}
}
