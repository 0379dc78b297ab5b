package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func newKeys(t *testing.T) *Keys {
	t.Helper()
	return NewKeys(pgtest.NewPool(t), nil)
}

func mustTenant(t *testing.T, k *Keys, id string) {
	t.Helper()
	if _, err := k.CreateTenant(context.Background(), "test", id, id+" inc"); err != nil {
		t.Fatal(err)
	}
}

func mustKey(t *testing.T, k *Keys, tenant string, role Role, expires *time.Time) (Key, string) {
	t.Helper()
	key, secret, err := k.CreateKey(context.Background(), "test", tenant, role, expires)
	if err != nil {
		t.Fatal(err)
	}
	return key, secret
}

func TestKeyLifecycle(t *testing.T) {
	ctx := context.Background()
	k := newKeys(t)
	mustTenant(t, k, "acme")
	key, secret := mustKey(t, k, "acme", RoleWriter, nil)

	p, err := k.Authenticate(ctx, secret)
	if err != nil || p.KeyID != key.ID || p.Tenant.ID != "acme" || p.Tenant.No == 0 || p.Role != RoleWriter {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	forged := secret[:len(secret)-4] + "AAAA"
	for name, s := range map[string]string{"empty": "", "malformed": "hello", "forged": forged, "other id": strings.Replace(secret, key.ID, "key_0000000000000000", 1)} {
		if _, err := k.Authenticate(ctx, s); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s secret: err = %v, want ErrUnauthenticated", name, err)
		}
	}

	if _, err := k.RevokeKey(ctx, "test", key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Authenticate(ctx, secret); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("revoked key: err = %v", err)
	}
	if ok, err := k.ValidKey(ctx, p.KeyID); ok || err != nil {
		t.Errorf("ValidKey(revoked) = %v, %v", ok, err)
	}
	if _, err := k.RevokeKey(ctx, "test", key.ID); !errors.Is(err, ErrNoKey) {
		t.Errorf("second revoke: err = %v", err)
	}
}

func TestRotationKeepsBothKeysValid(t *testing.T) {
	ctx := context.Background()
	k := newKeys(t)
	mustTenant(t, k, "acme")
	oldKey, oldSecret := mustKey(t, k, "acme", RoleWriter, nil)
	_, newSecret := mustKey(t, k, "acme", RoleWriter, nil)
	for _, s := range []string{oldSecret, newSecret} {
		if _, err := k.Authenticate(ctx, s); err != nil {
			t.Fatalf("during rotation: %v", err)
		}
	}
	if _, err := k.RevokeKey(ctx, "test", oldKey.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Authenticate(ctx, newSecret); err != nil {
		t.Errorf("new key after revoking the old: %v", err)
	}
	if _, err := k.Authenticate(ctx, oldSecret); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("old key after its revocation: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	ctx := context.Background()
	k := newKeys(t)
	mustTenant(t, k, "acme")
	at := time.Now().Add(time.Hour)
	_, secret := mustKey(t, k, "acme", RoleReader, &at)
	if _, err := k.Authenticate(ctx, secret); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	k.now = func() time.Time { return at }
	if _, err := k.Authenticate(ctx, secret); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("at expiry: err = %v", err)
	}
}

func TestAdministrationErrors(t *testing.T) {
	ctx := context.Background()
	k := newKeys(t)
	mustTenant(t, k, "acme")
	if _, err := k.CreateTenant(ctx, "test", "acme", ""); !errors.Is(err, ErrTenantExists) {
		t.Errorf("duplicate tenant: %v", err)
	}
	for _, bad := range []string{"", "-x", "a b", "a/b", strings.Repeat("a", 65), "ümlaut"} {
		if _, err := k.CreateTenant(ctx, "test", bad, ""); !errors.Is(err, ErrBadTenantName) {
			t.Errorf("tenant %q: %v", bad, err)
		}
	}
	if _, _, err := k.CreateKey(ctx, "test", "nobody", RoleWriter, nil); !errors.Is(err, ErrNoTenant) {
		t.Errorf("key of a missing tenant: %v", err)
	}
	if _, _, err := k.CreateKey(ctx, "test", "acme", Role("root"), nil); err == nil {
		t.Error("unknown role accepted")
	}
	past := time.Now().Add(-time.Minute)
	if _, _, err := k.CreateKey(ctx, "test", "acme", RoleReader, &past); !errors.Is(err, ErrBadExpiry) {
		t.Errorf("expiry in the past: %v", err)
	}
	if _, err := k.RevokeKey(ctx, "test", "key_0000000000000000"); !errors.Is(err, ErrNoKey) {
		t.Errorf("revoke unknown: %v", err)
	}
}

func TestAuditLogRecordsAdministrationWithoutSecrets(t *testing.T) {
	ctx := context.Background()
	k := newKeys(t)
	mustTenant(t, k, "acme")
	key, secret := mustKey(t, k, "acme", RoleReader, nil)
	if _, err := k.RevokeKey(ctx, "alice", key.ID); err != nil {
		t.Fatal(err)
	}
	entries, err := k.Audit(ctx, "acme", 10)
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
	k := newKeys(t)
	mustTenant(t, k, "acme")
	mustTenant(t, k, "globex")
	a, _ := mustKey(t, k, "acme", RoleWriter, nil)
	mustKey(t, k, "globex", RoleReader, nil)
	keys, err := k.ListKeys(ctx, "acme")
	if err != nil || len(keys) != 1 || keys[0].ID != a.ID || keys[0].Role != RoleWriter {
		t.Errorf("ListKeys(acme) = %+v, %v", keys, err)
	}
	if all, err := k.ListKeys(ctx, ""); err != nil || len(all) != 2 {
		t.Errorf("ListKeys() = %+v, %v", all, err)
	}
	tenants, err := k.ListTenants(ctx)
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
	k := newKeys(t)
	mustTenant(t, k, "acme")
	key, _ := mustKey(t, k, "acme", RoleWriter, nil)
	changes := make(chan string, 8)
	done := make(chan error, 1)
	go func() { done <- k.Watch(ctx, func(id string) { changes <- id }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	if got := <-changes; got != "" {
		t.Fatalf("first change = %q, want the re-check-all signal", got)
	}
	if _, err := k.RevokeKey(ctx, "test", key.ID); err != nil {
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

func TestSplitClientTag(t *testing.T) {
	tests := []struct{ tag, clean, secret string }{
		{"agent-7", "agent-7", ""},
		{"agent-7;key=cbk_key_x_y", "agent-7", "cbk_key_x_y"},
		{"cbk_key_0123456789abcdef_zzz", "", "cbk_key_0123456789abcdef_zzz"},
		{";key=s", "", "s"},
		{"", "", ""},
	}
	for _, tt := range tests {
		if clean, secret := SplitClientTag(tt.tag); clean != tt.clean || secret != tt.secret {
			t.Errorf("SplitClientTag(%q) = %q, %q; want %q, %q", tt.tag, clean, secret, tt.clean, tt.secret)
		}
	}
}

func TestSecretFormat(t *testing.T) {
	id, secret, _ := newSecret()
	if got, ok := keyIDOf(secret); !ok || got != id {
		t.Errorf("keyIDOf(%q) = %q, %v; want %q", secret, got, ok, id)
	}
	for _, bad := range []string{"", "cbk_", secret[:len(secret)-1], strings.Replace(secret, "key_", "kez_", 1), "cbk_key_zzzzzzzzzzzzzzzz_" + secret[len(secret)-43:]} {
		if _, ok := keyIDOf(bad); ok {
			t.Errorf("keyIDOf(%q) accepted", bad)
		}
	}
}
