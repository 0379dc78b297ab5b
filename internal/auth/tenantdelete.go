package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/sqlc/db"
	"github.com/cardboxhq/cardbox/store"
)

// Errors of tenant deletion.
var (
	// ErrDefaultTenant: the default tenant (dev mode's) is not deleted.
	ErrDefaultTenant = errors.New("the default tenant cannot be deleted")
	// ErrTenantDeleted: a tenant of that id existed and was deleted; its
	// id is not used again. It matches ErrTenantExists.
	ErrTenantDeleted = fmt.Errorf("%w: it was deleted, and a deleted tenant's id is not used again", ErrTenantExists)
)

// TableRows is how many rows of one table a tenant owns, or its deletion
// removed.
type TableRows struct {
	Table string `json:"table"`
	Rows  int64  `json:"rows"`
}

// Deletion is what deleting a tenant removed (or, before it, would
// remove), per table.
type Deletion struct {
	TenantID string      `json:"tenant_id"`
	Tables   []TableRows `json:"tables"`
	// Unremoved are the tenant's analysts' Postgres login roles that could
	// not be dropped (see DeleteTenant); they can read nothing.
	Unremoved []string `json:"unremoved_sql_roles,omitempty"`
	sqlRoles  []string
}

// Total is the number of rows of every table.
func (d Deletion) Total() int64 {
	var n int64
	for _, t := range d.Tables {
		n += t.Rows
	}
	return n
}

// detail is the audit log's record of the deletion: rows per table.
func (d Deletion) detail() map[string]any {
	rows := make(map[string]int64, len(d.Tables))
	for _, t := range d.Tables {
		rows[t.Table] = t.Rows
	}
	return map[string]any{"rows": rows}
}

// TenantRows returns what deleting the tenant would remove, and changes
// nothing.
func (k *Keys) TenantRows(ctx context.Context, id string) (Deletion, error) {
	if _, err := k.admin.GetTenant(ctx, id); errors.Is(err, pgx.ErrNoRows) {
		return Deletion{}, fmt.Errorf("count the rows of tenant %q: %w", id, ErrNoTenant)
	} else if err != nil {
		return Deletion{}, fmt.Errorf("count the rows of tenant %q: %w", id, err)
	}
	rows, err := k.admin.CountTenantRows(ctx, id)
	if err != nil {
		return Deletion{}, fmt.Errorf("count the rows of tenant %q: %w", id, err)
	}
	d := Deletion{TenantID: id, Tables: make([]TableRows, len(rows))}
	for i, r := range rows {
		d.Tables[i] = TableRows{Table: r.TableName, Rows: r.RowCount}
	}
	return d, nil
}

// DeleteTenant deletes a tenant at once, recording actor in the audit
// log: in one transaction every row it owns is removed (its keys too, so
// they stop working from the next request) and every server is told
// (WatchTenants) to forget it: its contexts, turns and blobs read as if
// they never existed from then on. Its tenants row stays, marked
// deleted: the data directory's files still hold its turn records and
// blobs, by tenant number, until a compaction rewrites them (see
// docs/security.md), and the id is never used again. The default tenant
// is refused. The Postgres login roles of its analysts are dropped after
// the transaction when the session may (Deletion.Unremoved lists those
// left).
func (k *Keys) DeleteTenant(ctx context.Context, actor, id string) (Deletion, error) {
	if id == store.DefaultTenantID {
		return Deletion{}, fmt.Errorf("delete tenant %q: %w", id, ErrDefaultTenant)
	}
	d := Deletion{TenantID: id}
	// Not bounded (Bound): a large tenant's DELETEs may take longer.
	err := k.inAuditedTx(ctx, k.pool, adminQueries, func(_ pgx.Tx, q *db.Queries) ([]audit, error) {
		a, err := deleteTenant(ctx, q, id, actor, &d)
		return []audit{a}, err
	})
	if err != nil {
		return Deletion{}, fmt.Errorf("delete tenant %q: %w", id, err)
	}
	d.Unremoved = k.dropLoginRoles(ctx, d.sqlRoles)
	return d, nil
}

// deleteTenant removes tenant id's rows in q's transaction, recording in d
// what went, and returns the audit record of it.
func deleteTenant(ctx context.Context, q *db.Queries, id, actor string, d *Deletion) (audit, error) {
	no, err := q.LockTenantForDelete(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return audit{}, ErrNoTenant
	} else if err != nil {
		return audit{}, err
	}
	if err := q.LockTenantAgainstProjection(ctx, no); err != nil {
		return audit{}, err
	}
	roles, err := q.ListSQLRoles(ctx, pgtype.Text{String: id, Valid: true})
	if err != nil {
		return audit{}, err
	}
	for _, r := range roles {
		d.sqlRoles = append(d.sqlRoles, r.RoleName)
	}
	tables, err := deleteTenantRows(ctx, q, id)
	d.Tables = tables
	return audit{actor: actor, action: "tenant.delete", tenant: id, target: id, detail: d.detail()}, err
}

// dropLoginRoles drops the Postgres login roles of a deleted tenant's
// analysts (their sql_roles rows went with the tenant, so they read
// nothing already) and returns those it could not drop: only the schema's
// owner may (the CLI; not a server over pgrole.Server).
func (k *Keys) dropLoginRoles(ctx context.Context, roles []string) []string {
	var left []string
	for _, r := range roles {
		if _, err := k.pool.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{r}.Sanitize()); err != nil {
			k.log.Warn("drop the SQL role of a deleted tenant", "role", r, "err", err)
			left = append(left, r)
		}
	}
	return left
}

// deleteTenantRows marks a locked tenant deleted, removes its rows and
// tells the servers, in the caller's transaction.
func deleteTenantRows(ctx context.Context, q *db.Queries, id string) ([]TableRows, error) {
	// Before its keys go: the notifications name them.
	if err := q.NotifyTenantKeysDeleted(ctx, id); err != nil {
		return nil, err
	}
	if err := q.MarkTenantDeleted(ctx, id); err != nil {
		return nil, err
	}
	tables, err := purge(ctx, q, id)
	if err != nil {
		return nil, err
	}
	return tables, q.NotifyTenantDeleted(ctx, id)
}

// PurgeDeleted removes the rows of deleted tenant id (of every deleted
// tenant when id is "") that writes in flight while it was deleted added
// after its deletion: what a server runs once it has stopped taking the
// tenant's writes. A live tenant's rows are never touched.
func (k *Keys) PurgeDeleted(ctx context.Context, id string) ([]TableRows, error) {
	tables, err := purge(ctx, k.admin, id)
	if err != nil {
		return nil, fmt.Errorf("purge the rows of deleted tenant %q: %w", id, err)
	}
	return tables, nil
}

func purge(ctx context.Context, q *db.Queries, id string) ([]TableRows, error) {
	rows, err := q.PurgeDeletedTenants(ctx, pgtype.Text{String: id, Valid: id != ""})
	if err != nil {
		return nil, err
	}
	out := make([]TableRows, len(rows))
	for i, r := range rows {
		out[i] = TableRows{Table: r.TableName, Rows: r.RowCount}
	}
	return out, nil
}

// DeletedTenants returns every deleted tenant.
func (k *Keys) DeletedTenants(ctx context.Context) ([]store.Tenant, error) {
	rows, err := k.admin.ListDeletedTenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("list deleted tenants: %w", err)
	}
	out := make([]store.Tenant, len(rows))
	for i, r := range rows {
		out[i] = store.Tenant{ID: r.TenantID, No: uint32(r.TenantNo)}
	}
	return out, nil
}
