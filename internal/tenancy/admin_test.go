package tenancy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// keysOf checks the keys adm makes, as a server does.
func keysOf(adm *Admin) *auth.Keys { return auth.NewKeys(adm.pool, nil) }

func newKeys(t *testing.T) *Admin {
	t.Helper()
	return New(pgtest.NewPool(t), nil)
}

func mustTenant(t *testing.T, adm *Admin, id string) {
	t.Helper()
	if _, err := adm.CreateTenant(context.Background(), "test", id, id+" inc"); err != nil {
		t.Fatal(err)
	}
}

func mustKey(t *testing.T, adm *Admin, tenant string, role auth.Role, expires *time.Time) (Key, string) {
	t.Helper()
	key, secret, err := adm.CreateKey(context.Background(), "test", tenant, role, expires)
	if err != nil {
		t.Fatal(err)
	}
	return key, secret
}

func TestKeyLifecycle(t *testing.T) {
	ctx := context.Background()
	adm := newKeys(t)
	mustTenant(t, adm, "acme")
	key, secret := mustKey(t, adm, "acme", auth.RoleWriter, nil)

	p, err := keysOf(adm).Authenticate(ctx, secret)
	if err != nil || p.KeyID != key.ID || p.Tenant.ID != "acme" || p.Tenant.No == 0 || p.Role != auth.RoleWriter {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	forged := secret[:len(secret)-4] + "AAAA"
	for name, s := range map[string]string{"empty": "", "malformed": "hello", "forged": forged, "other id": strings.Replace(secret, key.ID, "key_0000000000000000", 1)} {
		if _, err := keysOf(adm).Authenticate(ctx, s); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("%s secret: err = %v, want auth.ErrUnauthenticated", name, err)
		}
	}

	if _, err := adm.RevokeKey(ctx, "test", key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := keysOf(adm).Authenticate(ctx, secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("revoked key: err = %v", err)
	}
	if ok, err := keysOf(adm).ValidKey(ctx, p.KeyID); ok || err != nil {
		t.Errorf("ValidKey(revoked) = %v, %v", ok, err)
	}
	if _, err := adm.RevokeKey(ctx, "test", key.ID); !errors.Is(err, ErrNoKey) {
		t.Errorf("second revoke: err = %v", err)
	}
}

func TestRotationKeepsBothKeysValid(t *testing.T) {
	ctx := context.Background()
	adm := newKeys(t)
	mustTenant(t, adm, "acme")
	oldKey, oldSecret := mustKey(t, adm, "acme", auth.RoleWriter, nil)
	_, newSecret := mustKey(t, adm, "acme", auth.RoleWriter, nil)
	for _, s := range []string{oldSecret, newSecret} {
		if _, err := keysOf(adm).Authenticate(ctx, s); err != nil {
			t.Fatalf("during rotation: %v", err)
		}
	}
	if _, err := adm.RevokeKey(ctx, "test", oldKey.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := keysOf(adm).Authenticate(ctx, newSecret); err != nil {
		t.Errorf("new key after revoking the old: %v", err)
	}
	if _, err := keysOf(adm).Authenticate(ctx, oldSecret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("old key after its revocation: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	ctx := context.Background()
	adm := newKeys(t)
	mustTenant(t, adm, "acme")
	at := time.Now().Add(time.Hour)
	_, secret := mustKey(t, adm, "acme", auth.RoleReader, &at)
	if _, err := keysOf(adm).Authenticate(ctx, secret); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	// A key past its expiry: made by a clock two hours behind, to expire
	// an hour ago.
	adm.now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
	past := time.Now().Add(-time.Hour)
	_, expired := mustKey(t, adm, "acme", auth.RoleReader, &past)
	if _, err := keysOf(adm).Authenticate(ctx, expired); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("after expiry: err = %v", err)
	}
}

func TestAdministrationErrors(t *testing.T) {
	ctx := context.Background()
	adm := newKeys(t)
	mustTenant(t, adm, "acme")
	if _, err := adm.CreateTenant(ctx, "test", "acme", ""); !errors.Is(err, ErrTenantExists) {
		t.Errorf("duplicate tenant: %v", err)
	}
	for _, bad := range []string{"", "-x", "a b", "a/b", strings.Repeat("a", 65), "ümlaut"} {
		if _, err := adm.CreateTenant(ctx, "test", bad, ""); !errors.Is(err, ErrBadTenantName) {
			t.Errorf("tenant %q: %v", bad, err)
		}
	}
	if _, _, err := adm.CreateKey(ctx, "test", "nobody", auth.RoleWriter, nil); !errors.Is(err, auth.ErrNoTenant) {
		t.Errorf("key of a missing tenant: %v", err)
	}
	if _, _, err := adm.CreateKey(ctx, "test", "acme", auth.Role("root"), nil); err == nil {
		t.Error("unknown role accepted")
	}
	past := time.Now().Add(-time.Minute)
	if _, _, err := adm.CreateKey(ctx, "test", "acme", auth.RoleReader, &past); !errors.Is(err, ErrBadExpiry) {
		t.Errorf("expiry in the past: %v", err)
	}
	if _, err := adm.RevokeKey(ctx, "test", "key_0000000000000000"); !errors.Is(err, ErrNoKey) {
		t.Errorf("revoke unknown: %v", err)
	}
}

func TestAuditLogRecordsAdministrationWithoutSecrets(t *testing.T) {
	ctx := context.Background()
	adm := newKeys(t)
	mustTenant(t, adm, "acme")
	key, secret := mustKey(t, adm, "acme", auth.RoleReader, nil)
	if _, err := adm.RevokeKey(ctx, "alice", key.ID); err != nil {
		t.Fatal(err)
	}
	entries, err := adm.Audit(ctx, "acme", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Actor+" "+e.Action+" "+e.Target)
		if strings.Contains(string(e.Detail), secret) || strings.Contains(e.Target, secret) {
			t.Errorf("audit entry holds the secret: %+v", e)
		}
	}
	want := []string{"alice key.revoke " + key.ID, "test key.create " + key.ID, "test tenant.create acme"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit = %q, want %q", got, want)
	}
}

func TestListings(t *testing.T) {
	ctx := context.Background()
	adm := newKeys(t)
	mustTenant(t, adm, "acme")
	mustTenant(t, adm, "globex")
	a, _ := mustKey(t, adm, "acme", auth.RoleWriter, nil)
	mustKey(t, adm, "globex", auth.RoleReader, nil)
	keys, err := adm.ListKeys(ctx, "acme")
	if err != nil || len(keys) != 1 || keys[0].ID != a.ID || keys[0].Role != auth.RoleWriter {
		t.Errorf("ListKeys(acme) = %+v, %v", keys, err)
	}
	if all, err := adm.ListKeys(ctx, ""); err != nil || len(all) != 2 {
		t.Errorf("ListKeys() = %+v, %v", all, err)
	}
	tenants, err := adm.ListTenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]int64{}
	for _, tn := range tenants {
		live[tn.ID] = tn.LiveKeys
	}
	if live["acme"] != 1 || live["globex"] != 1 || live["default"] != 0 {
		t.Errorf("tenants = %+v", tenants)
	}
}

func TestWatchReportsRevocations(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	adm := newKeys(t)
	mustTenant(t, adm, "acme")
	key, _ := mustKey(t, adm, "acme", auth.RoleWriter, nil)
	changes := make(chan string, 8)
	done := make(chan error, 1)
	go func() { done <- keysOf(adm).Watch(ctx, func(id string) { changes <- id }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	if got := <-changes; got != "" {
		t.Fatalf("first change = %q, want the re-check-all signal", got)
	}
	if _, err := adm.RevokeKey(ctx, "test", key.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-changes:
		if got != key.ID {
			t.Errorf("change = %q, want %q", got, key.ID)
		}
	case <-time.After(time.Second):
		t.Error("no notification within a second of the revocation")
	}
}
