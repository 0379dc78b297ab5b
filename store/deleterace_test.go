package store

import (
	"context"
	"testing"

	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// An append racing its tenant's deletion must not deadlock with it. The
// deletion locks the tenant's row, then deletes the tenant's contexts
// (internal/tenancy's DeleteTenant); a group's statement updates the heads of
// its contexts and, for a blob another tenant stored first or a type new
// to the tenant, inserts a row that named the tenant's row by a foreign
// key, checked (FOR KEY SHARE) after the heads were locked. Postgres then
// failed the deletion or the whole group, other tenants' appends with it.
func TestAppendsDoNotDeadlockWithTenantDeletion(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  func(h Head) *AppendRequest
	}{
		{"bytes another tenant stored first", func(h Head) *AppendRequest {
			return turnReq(h.ContextID, h.TurnID, []byte("shared"))
		}},
		{"a type new to the tenant", func(h Head) *AppendRequest {
			r := turnReq(h.ContextID, h.TurnID, []byte("of another type"))
			r.TypeID = "acme.Other"
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := newTestStore(t)
			acme, bravo := s.tenant("acme"), s.tenant("bravo")
			s.append(bravo, turnReq(s.create(bravo, 0).ContextID, 0, []byte("shared")))
			h := s.create(acme, 0)
			first := s.append(acme, turnReq(h.ContextID, 0, []byte("acme's first")))
			h.TurnID = first.TurnID

			deletion := pgtest.BeginDeletion(t, s.pool, "acme")
			appended := make(chan error, 1)
			go func() {
				_, err := s.Append(ctx, acme, tc.req(h))
				appended <- err
			}()
			appendErr, done := pgtest.UntilDoneOrWaiting(t, s.pool, appended)
			if err := deletion.Finish(); err != nil {
				t.Fatalf("the deletion: %v", err)
			}
			if !done {
				appendErr = <-appended
			}
			if appendErr != nil {
				t.Fatalf("the append: %v", appendErr)
			}
		})
	}
}
