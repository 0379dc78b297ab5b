package tenancy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/auth"
)

// SetQuota sets and clears a tenant's quota, audited, and refuses what is
// not a quota; TenantQuota and TenantQuotas read it back with the bytes of
// the tenant's cards and boxes.
func TestSetQuota(t *testing.T) {
	ctx := context.Background()
	adm := newKeys(t)
	mustTenant(t, adm, "acme")
	for _, tt := range []struct {
		tenant string
		bytes  int64
		err    error
		want   int64 // acme's own quota afterwards
	}{
		{"acme", 1 << 20, nil, 1 << 20},
		{"acme", 5000, nil, 5000},
		{"acme", -1, ErrBadQuota, 5000},
		{"nobody", 5000, auth.ErrNoTenant, 5000},
		{"acme", 0, nil, 0}, // back to the server's default
	} {
		if err := adm.SetQuota(ctx, "alice", tt.tenant, tt.bytes); !errors.Is(err, tt.err) {
			t.Errorf("SetQuota(%s, %d) = %v, want %v", tt.tenant, tt.bytes, err, tt.err)
		}
		q, err := adm.TenantQuota(ctx, "acme")
		if err != nil || q.Bytes != tt.want {
			t.Errorf("after SetQuota(%s, %d): %+v, %v; want quota %d", tt.tenant, tt.bytes, q, err, tt.want)
		}
	}
	if _, err := adm.TenantQuota(ctx, "nobody"); !errors.Is(err, auth.ErrNoTenant) {
		t.Errorf("TenantQuota(nobody) = %v", err)
	}
	entries, err := adm.Audit(ctx, "acme", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Action == "tenant.quota" {
			got = append(got, e.Actor+" "+string(e.Detail))
		}
	}
	want := []string{`alice {"quota_bytes": 0}`, `alice {"quota_bytes": 5000}`, `alice {"quota_bytes": 1048576}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit = %q, want %q", got, want)
	}

	// A card's bytes: its id, its JSON's text and its tool_call_id.
	if _, err := adm.pool.Exec(ctx, `INSERT INTO cards (tenant_id, card_id, content, tool_call_id, metadata)
		VALUES ('acme', 'c1', '"hi"', 'call', '{}')`); err != nil {
		t.Fatal(err)
	}
	all, err := adm.TenantQuotas(ctx)
	if err != nil || all["acme"].CardBoxBytes != 2+4+4+2 || all["default"] != (Quota{}) {
		t.Errorf("TenantQuotas = %+v, %v", all, err)
	}
}
