package tenancy

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgerr"
	"github.com/cardboxhq/cardbox/internal/tenancy/internal/tenancydb"
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
func (adm *Admin) TenantRows(ctx context.Context, id string) (Deletion, error) {
	if _, err := adm.admin.GetTenant(ctx, id); errors.Is(err, pgx.ErrNoRows) {
		return Deletion{}, fmt.Errorf("count the rows of tenant %q: %w", id, auth.ErrNoTenant)
	} else if err != nil {
		return Deletion{}, fmt.Errorf("count the rows of tenant %q: %w", id, err)
	}
	rows, err := adm.admin.CountTenantRows(ctx, id)
	if err != nil {
		return Deletion{}, fmt.Errorf("count the rows of tenant %q: %w", id, err)
	}
	d := Deletion{TenantID: id, Tables: make([]TableRows, len(rows))}
	for i, r := range rows {
		d.Tables[i] = TableRows{Table: r.TableName, Rows: r.RowCount}
	}
	return d, nil
}

// deleteAttempts is how many times DeleteTenant marks a tenant deleted
// when Postgres aborts the marking for a deadlock.
const deleteAttempts = 3

// DeleteTenant deletes a tenant, recording actor in the audit log. One
// transaction marks it deleted, counts the rows it owns (the audit
// record's and Deletion's figures), forgets its analysts' SQL roles and
// drops their Postgres login roles when the session may
// (Deletion.Unremoved lists those left; they read nothing), and tells
// every server (WatchTenants) to forget it: from its commit its keys no
// longer work and its contexts, turns and blobs read as if they never
// existed. Then its rows are removed in batches, each a statement of its
// own (purgeBatchRows rows per table). Its tenants row stays, marked
// deleted: the data directory's files still hold its turn records and
// blobs, by tenant number, until a compaction rewrites them (see
// docs/security.md), and the id is never used again. The default tenant
// is refused.
//
// With Bound each call ends within the bound, the batches each on their
// own, so a large tenant's deletion may take many bounds while Postgres
// answers, and fails as unavailable within one when it does not. Then
// either nothing changed (the marking did not commit) or the tenant is
// deleted and rows of it are left, unreadable: deleting it again
// (ErrNoTenant: it is deleted already) removes them, as does any
// server's purge of deleted tenants (PurgeDeleted, on the notification
// and at start-up). The audit log holds one record of the deletion
// either way.
func (adm *Admin) DeleteTenant(ctx context.Context, actor, id string) (Deletion, error) {
	if id == ident.DefaultTenantID {
		return Deletion{}, fmt.Errorf("delete tenant %q: %w", id, ErrDefaultTenant)
	}
	var d Deletion
	var err error
	// The marking locks the tenant's rows against writes in flight,
	// which Postgres may find deadlocked with one of them: it aborts the
	// whole transaction, so marking again is safe.
	for attempt := 1; ; attempt++ {
		d = Deletion{TenantID: id}
		err = adm.inAuditedTx(ctx, adm.begin, adminQueries, func(tx pgx.Tx, q *tenancydb.Queries) ([]audit, error) {
			a, err := adm.markTenantDeleted(ctx, tx, q, id, actor, &d)
			return []audit{a}, err
		})
		if !pgerr.Conflict(err) || attempt == deleteAttempts {
			break
		}
	}
	if errors.Is(err, auth.ErrNoTenant) {
		// Deleted already, perhaps by a deletion that was cut short:
		// remove what it left, and say it is gone.
		if perr := adm.purgeInBatches(ctx, id); perr != nil {
			return Deletion{}, fmt.Errorf("delete tenant %q: remove the rows its deletion left: %w", id, perr)
		}
	}
	if err != nil {
		return Deletion{}, fmt.Errorf("delete tenant %q: %w", id, err)
	}
	if err := adm.purgeInBatches(ctx, id); err != nil {
		return Deletion{}, fmt.Errorf("delete tenant %q: it is deleted, and rows of it are left "+
			"(deleting it again removes them): %w", id, err)
	}
	return d, nil
}

// markTenantDeleted marks live tenant id deleted in tx (q its queries),
// recording in d what it owns, and returns the audit record of it.
func (adm *Admin) markTenantDeleted(ctx context.Context, tx pgx.Tx, q *tenancydb.Queries, id, actor string, d *Deletion) (audit, error) {
	no, err := q.LockTenantForDelete(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return audit{}, auth.ErrNoTenant
	} else if err != nil {
		return audit{}, err
	}
	if err := q.LockTenantAgainstProjection(ctx, no); err != nil {
		return audit{}, err
	}
	rows, err := q.CountTenantRows(ctx, id)
	if err != nil {
		return audit{}, err
	}
	d.Tables = make([]TableRows, len(rows))
	for i, r := range rows {
		d.Tables[i] = TableRows{Table: r.TableName, Rows: r.RowCount}
	}
	// Its analysts read nothing from the commit on, even before the
	// batches remove its rows.
	roles, err := q.DeleteSQLRoles(ctx, tenancydb.DeleteSQLRolesParams{TenantID: pgtype.Text{String: id, Valid: true}})
	if err != nil {
		return audit{}, err
	}
	for _, r := range roles {
		if err := adm.dropLoginRole(ctx, tx, r.RoleName); pgerr.Unavailable(err) {
			return audit{}, err
		} else if err != nil {
			adm.log.Warn("drop the SQL role of a deleted tenant", "role", r.RoleName, "err", err)
			d.Unremoved = append(d.Unremoved, r.RoleName)
		}
	}
	// Before its keys go: the notifications name them.
	if err := q.NotifyTenantKeysDeleted(ctx, id); err != nil {
		return audit{}, err
	}
	if err := q.MarkTenantDeleted(ctx, id); err != nil {
		return audit{}, err
	}
	if err := q.NotifyTenantDeleted(ctx, id); err != nil {
		return audit{}, err
	}
	return audit{actor: actor, action: "tenant.delete", tenant: id, target: id, detail: d.detail()}, nil
}

// dropLoginRole drops the Postgres login role of a deleted tenant's
// analyst in a savepoint of tx: only the schema's owner may (the CLI; not
// a server over pgrole.Server), and a refusal must not undo the deletion.
func (adm *Admin) dropLoginRole(ctx context.Context, tx pgx.Tx, role string) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := sp.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize()); err != nil {
		if rerr := sp.Rollback(ctx); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return sp.Commit(ctx)
}

// purgeBatchRows is how many rows of each table one batch of a deletion
// removes: few enough that a batch takes a fraction of --pg-timeout.
const purgeBatchRows = 5000

// purgeInBatches removes the rows of deleted tenant id batch by batch
// until none is left, or another purge holds the tenant (it removes the
// rest). Nothing happens for a live or unknown tenant.
func (adm *Admin) purgeInBatches(ctx context.Context, id string) error {
	for {
		n, err := adm.admin.PurgeDeletedTenantBatch(ctx, tenancydb.PurgeDeletedTenantBatchParams{TenantID: id, Batch: purgeBatchRows})
		if err != nil || n == 0 {
			return err
		}
	}
}

// PurgeDeleted removes the rows of deleted tenant id (of every deleted
// tenant when id is "") that writes in flight while it was deleted added
// after its deletion: what a server runs once it has stopped taking the
// tenant's writes. A live tenant's rows are never touched.
func (adm *Admin) PurgeDeleted(ctx context.Context, id string) ([]TableRows, error) {
	tables, err := purge(ctx, adm.admin, id)
	if err != nil {
		return nil, fmt.Errorf("purge the rows of deleted tenant %q: %w", id, err)
	}
	return tables, nil
}

func purge(ctx context.Context, q *tenancydb.Queries, id string) ([]TableRows, error) {
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
func (adm *Admin) DeletedTenants(ctx context.Context) ([]ident.Tenant, error) {
	rows, err := adm.admin.ListDeletedTenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("list deleted tenants: %w", err)
	}
	out := make([]ident.Tenant, len(rows))
	for i, r := range rows {
		out[i] = ident.Tenant{ID: r.TenantID, No: uint32(r.TenantNo)}
	}
	return out, nil
}
