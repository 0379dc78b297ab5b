package tenancy

import (
	"context"

	"github.com/cardboxhq/cardbox/internal/pglisten"
)

// tenantsChannel is the Postgres notification channel that carries the id
// of a tenant that was deleted.
const tenantsChannel = "cardbox_tenants"

// WatchTenants calls deleted with the id of every tenant that is deleted,
// in any process, until ctx ends; its caller forgets the tenant. After
// every (re)connection, deleted("") says "a deletion may have been
// missed: look for every deleted tenant". It returns when ctx ends.
func (adm *Admin) WatchTenants(ctx context.Context, deleted func(tenantID string)) error {
	pglisten.Watch(ctx, adm.pool, adm.log, tenantsChannel, deleted)
	return nil
}
