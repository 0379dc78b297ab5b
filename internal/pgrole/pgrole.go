// Package pgrole runs each statement as the Postgres role of the server's
// path that sends it, and for a request as its tenant, so that row-level
// security (migrations/00011_row_security.sql) holds every statement to
// what its path may see.
//
// The role and tenant are set with set_config(..., true), local to the
// statement's transaction, in the same round trip as the statement: a
// pgx batch runs as one implicit transaction, and in an explicit
// transaction the batch resets them after the statement. Nothing
// outlives the statement, so a pooled connection never carries one
// tenant's setting into another's statement; a statement sent without a
// scope runs as the connection's own role, which has no privileges.
package pgrole

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Role is a path's Postgres role.
type Role string

// The roles of the server's paths, and their grants, are made by the
// migrations; docs/security.md lists what each may do.
const (
	// Tenant handles requests: the rows of the one tenant its scope names.
	Tenant Role = "cardbox_tenant"
	// Committer is the group commit, writing many tenants' turns at once.
	Committer Role = "cardbox_committer"
	// Recovery reads every tenant's index at start-up, fences a dead
	// process and runs verify and recover.
	Recovery Role = "cardbox_recovery"
	// Sweeper deletes expired cards, boxes and idempotency keys.
	Sweeper Role = "cardbox_sweeper"
	// Lookup finds a key by its id and a tenant by its name.
	Lookup Role = "cardbox_lookup"
	// Admin administers tenants and keys.
	Admin Role = "cardbox_admin"
	// Projector writes the typed payloads of SQL analytics (turn_data)
	// for every tenant, off the append path.
	Projector Role = "cardbox_projector"
)

// Server is the role the server logs in as: no privileges of its own,
// member of every path role.
const Server = "cardbox_server"

// TenantSetting is the setting the Tenant role's policies compare
// tenant_id with.
const TenantSetting = "cardbox.tenant"

// setScope is the statement queued before each scoped one; endScope
// follows it inside an explicit transaction, whose later statements must
// not inherit the scope.
const (
	setScope = "SELECT set_config('role', $1, true), set_config('" + TenantSetting + "', $2, true)"
	endScope = "SELECT set_config('role', 'none', true), set_config('" + TenantSetting + "', '', true)"
)

// Batcher sends batches: a *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn or
// pgx.Tx.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Scope runs statements as one role (and tenant). It has the methods of
// sqlc's DBTX: db.New(pgrole.As(...)).
type Scope struct {
	d      Batcher
	role   Role
	tenant string
}

// As returns the scope of role over d. tenant names the tenant for the
// Tenant role and is ignored by the others.
func As(d Batcher, role Role, tenant string) Scope {
	return Scope{d: d, role: role, tenant: tenant}
}

// Queue queues, at the head of b, the statement that sets role and tenant
// for the rest of b (or of the transaction b runs in).
func Queue(b *pgx.Batch, role Role, tenant string) {
	b.Queue(setScope, string(role), tenant)
}

func (s Scope) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	Queue(b, s.role, s.tenant)
	b.Queue(sql, args...)
	if _, inTx := s.d.(pgx.Tx); inTx {
		b.Queue(endScope)
	}
	br := s.d.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return br, nil
}

// Exec runs a statement that returns no rows.
func (s Scope) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := s.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs a statement that returns rows; closing the rows returns the
// connection.
func (s Scope) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := s.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		rows.Close()
		return nil, errors.Join(err, br.Close())
	}
	return &scopedRows{Rows: rows, br: br}, nil
}

// QueryRow runs a statement that returns at most one row, when the row is
// scanned.
func (s Scope) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return scopedRow{s: s, ctx: ctx, sql: sql, args: args}
}

type scopedRow struct {
	s    Scope
	ctx  context.Context
	sql  string
	args []any
}

func (r scopedRow) Scan(dest ...any) error {
	br, err := r.s.send(r.ctx, r.sql, r.args)
	if err != nil {
		return err
	}
	err = br.QueryRow().Scan(dest...)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// scopedRows closes its batch with the rows.
type scopedRows struct {
	pgx.Rows
	br       pgx.BatchResults
	closeErr error
	closed   bool
}

// Next closes the batch after the last row, so that Err reports how it
// ended.
func (r *scopedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *scopedRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		r.closeErr = r.br.Close()
	}
}

func (r *scopedRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.closeErr
}
