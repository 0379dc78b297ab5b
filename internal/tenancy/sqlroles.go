package tenancy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/tenancy/internal/tenancydb"
)

// A SQL role is a Postgres login role of one analyst of one tenant
// (docs/security.md, "SQL access for analysts"): a member of the group
// role cardbox_analyst, which may read the tenant's turns, turn metadata,
// contexts, cards and boxes, row-level security showing it its tenant's
// rows only (migration 00012). It logs in with a password over the
// embedded cluster's loopback TCP listener (--sql-addr).

// SQLRole is a SQL role as administration lists it; never its password.
type SQLRole struct {
	Name      string     `json:"role_name"`
	TenantID  string     `json:"tenant_id"`
	CreatedAt time.Time  `json:"created_at"`
	RotatedAt *time.Time `json:"rotated_at,omitempty"`
	// Missing says the role was dropped outside cardbox: it is recorded
	// but cannot log in (create recreates it, drop forgets it).
	Missing bool `json:"missing,omitempty"`
	// Unended counts its sessions that a rotation or drop could not end
	// (-1: unknown, they could not be listed or signalled); they go on
	// until they disconnect.
	Unended int `json:"unended_sessions,omitempty"`
}

// SQLRoleConnLimit is how many sessions one SQL role may have open.
const SQLRoleConnLimit = 8

// sqlRolePrefix starts every derived role name.
const sqlRolePrefix = "cardbox_sql_"

// Errors of SQL role administration.
var (
	ErrBadSQLRoleName = errors.New("a SQL role name is 1 to 63 characters: lower-case letters, digits or '_', " +
		"starting with a letter and not with pg_")
	ErrSQLRoleTaken = errors.New("a Postgres role of that name exists and is not a SQL role of this tenant")
	ErrNoSQLRole    = errors.New("no such SQL role")
	// ErrSQLRolesUnavailable: the role cardbox connects as may not create
	// roles, or analysts could create objects in the tables' schema.
	ErrSQLRolesUnavailable = errors.New("SQL roles are unavailable on this database")
)

var sqlRoleName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// SQLRoleName is the role name derived for tenant: cardbox_sql_ and the
// tenant, each upper-case letter in lower case and each character outside
// [a-z0-9_] as '_'. When that changed anything or is over Postgres's 63
// bytes, 8 hex digits of the tenant's SHA-256 follow (the rest cut to
// fit), so that two tenants never get one name.
func SQLRoleName(tenant string) string {
	mapped := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '_'
	}, tenant)
	if name := sqlRolePrefix + mapped; mapped == tenant && len(name) <= 63 {
		return name
	}
	const keep = 63 - len(sqlRolePrefix) - 1 - 8
	if len(mapped) > keep {
		mapped = mapped[:keep]
	}
	sum := sha256.Sum256([]byte(tenant))
	return sqlRolePrefix + mapped + "_" + hex.EncodeToString(sum[:4])
}

// CreateSQLRole creates the SQL role of an analyst of tenant (role "":
// SQLRoleName(tenant)) or, when that role is the tenant's already, gives
// it a new password and ends its open sessions (rotation). It returns the
// role and its password, shown this once: Postgres keeps a SCRAM verifier
// of it, cardbox nothing.
func (adm *Admin) CreateSQLRole(ctx context.Context, actor, tenant, role string) (SQLRole, string, error) {
	var r SQLRole
	var password string
	err := adm.ownerAuditedTx(ctx, func(tx pgx.Tx, q *tenancydb.Queries) (_ []audit, err error) {
		if _, err := q.GetTenant(ctx, tenant); errors.Is(err, pgx.ErrNoRows) {
			return nil, auth.ErrNoTenant
		} else if err != nil {
			return nil, err
		}
		var a audit
		r, password, a, err = createSQLRole(ctx, tx, q, actor, tenant, role)
		return []audit{a}, err
	})
	if err != nil {
		return SQLRole{}, "", fmt.Errorf("create SQL role for tenant %q: %w", tenant, err)
	}
	if r.RotatedAt != nil {
		r.Unended = adm.endSessionsOf(ctx, r.Name)
	}
	return r, password, nil
}

// CreateTenantWithSQLRole creates a tenant and the SQL role of an analyst
// of it in one transaction; see CreateTenant and CreateSQLRole.
func (adm *Admin) CreateTenantWithSQLRole(ctx context.Context, actor, id, name string) (Tenant, SQLRole, string, error) {
	var t Tenant
	var r SQLRole
	var password string
	err := adm.ownerAuditedTx(ctx, func(tx pgx.Tx, q *tenancydb.Queries) ([]audit, error) {
		var ta, ra audit
		var err error
		if t, ta, err = createTenant(ctx, q, actor, id, name); err != nil {
			return nil, err
		}
		r, password, ra, err = createSQLRole(ctx, tx, q, actor, id, "")
		return []audit{ta, ra}, err
	})
	if err != nil {
		return Tenant{}, SQLRole{}, "", fmt.Errorf("create tenant %q with a SQL role: %w", id, err)
	}
	return t, r, password, nil
}

// createSQLRole creates or rotates a SQL role of tenant (which exists) in
// tx, and returns it with its password and the record for the audit log.
func createSQLRole(ctx context.Context, tx pgx.Tx, q *tenancydb.Queries, actor, tenant, role string) (SQLRole, string, audit, error) {
	role, rotate, err := prepareSQLRole(ctx, q, tenant, role)
	if err != nil {
		return SQLRole{}, "", audit{}, err
	}
	password := newSQLPassword()
	if err := writeLoginRole(ctx, tx, q, role, scramVerifier(password), rotate); err != nil {
		return SQLRole{}, "", audit{}, err
	}
	var row tenancydb.SqlRole
	action := "sqlrole.create"
	if rotate {
		action = "sqlrole.rotate"
		row, err = q.RotateSQLRole(ctx, role)
	} else {
		row, err = q.AddSQLRole(ctx, tenancydb.AddSQLRoleParams{RoleName: role, TenantID: tenant})
	}
	if err != nil {
		return SQLRole{}, "", audit{}, err
	}
	r := SQLRole{Name: row.RoleName, TenantID: row.TenantID, CreatedAt: row.CreatedAt, RotatedAt: timePtr(row.RotatedAt)}
	return r, password, audit{actor: actor, action: action, tenant: tenant, target: role}, nil
}

// prepareSQLRole checks the role's name (deriving it when role is ""),
// sets up the group role, its grants and policies if need be, and locks
// the role's record: rotate says the role is tenant's already.
func prepareSQLRole(ctx context.Context, q *tenancydb.Queries, tenant, role string) (name string, rotate bool, err error) {
	if role == "" {
		role = SQLRoleName(tenant)
	}
	if !sqlRoleName.MatchString(role) || strings.HasPrefix(role, "pg_") {
		return "", false, fmt.Errorf("%w: %q", ErrBadSQLRoleName, role)
	}
	if err := q.SetupSQLRoles(ctx); err != nil {
		return "", false, privilegeHint(fmt.Errorf("set up the group role cardbox_analyst: %w", err))
	}
	if can, err := q.AnalystsCanCreate(ctx); err != nil {
		return "", false, err
	} else if can {
		return "", false, fmt.Errorf("%w: analysts could create objects in the schema of cardbox's tables "+
			"(PUBLIC may CREATE there, the default before PostgreSQL 15); revoke that first: REVOKE CREATE ON SCHEMA public FROM PUBLIC",
			ErrSQLRolesUnavailable)
	}
	rec, err := q.LockSQLRole(ctx, role)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return role, false, nil
	case err != nil:
		return "", false, err
	case rec.TenantID != tenant:
		return "", false, fmt.Errorf("%w: %q", ErrSQLRoleTaken, role)
	}
	return role, true, nil
}

// writeLoginRole creates role with the password whose SCRAM verifier is
// given or, when it is recorded already (rotate), sets that password, and
// checks that the role has exactly an analyst's rights. A role that
// exists without a record is someone else's: it is left alone.
func writeLoginRole(ctx context.Context, tx pgx.Tx, q *tenancydb.Queries, role, verifier string, rotate bool) error {
	exists, err := q.PGRoleExists(ctx, role)
	if err != nil {
		return err
	}
	if exists && !rotate {
		return fmt.Errorf("%w: %q", ErrSQLRoleTaken, role)
	}
	ident := pgx.Identifier{role}.Sanitize()
	// Only a superuser may name SUPERUSER, REPLICATION or BYPASSRLS in
	// ALTER ROLE; the check below finds a role that has any of them.
	stmt := "CREATE ROLE " + ident + " LOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
	if exists {
		stmt = "ALTER ROLE " + ident + " LOGIN INHERIT NOCREATEDB NOCREATEROLE"
	}
	// Never in an error or a log: the statement holds the verifier.
	stmt += fmt.Sprintf(" CONNECTION LIMIT %d VALID UNTIL 'infinity' PASSWORD %s", SQLRoleConnLimit, verifierLiteral(verifier))
	if _, err := tx.Exec(ctx, stmt); err != nil {
		return privilegeHint(fmt.Errorf("create or alter role %s: %w", role, err))
	}
	if _, err := tx.Exec(ctx, "GRANT cardbox_analyst TO "+ident); err != nil {
		return privilegeHint(fmt.Errorf("grant cardbox_analyst to %s: %w", role, err))
	}
	confined, err := q.SQLRoleIsConfined(ctx, role)
	if err != nil {
		return err
	}
	if !confined {
		return fmt.Errorf("role %s has rights beyond an analyst's (a privileged attribute, or membership of another role): "+
			"refusing to give it a password; drop it or take them away", role)
	}
	return nil
}

// privilegeHint marks a refusal for lack of privilege as ErrSQLRolesUnavailable.
func privilegeHint(err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "42501" {
		return fmt.Errorf("%w (the role cardbox connects as needs CREATEROLE): %w", ErrSQLRolesUnavailable, err)
	}
	return err
}

// ListSQLRoles lists the SQL roles of tenant, or of every tenant when
// tenant is "".
func (adm *Admin) ListSQLRoles(ctx context.Context, tenant string) ([]SQLRole, error) {
	ctx, cancel := adm.bounded(ctx)
	defer cancel()
	rows, err := adm.owner().ListSQLRoles(ctx, pgtype.Text{String: tenant, Valid: tenant != ""})
	if err != nil {
		return nil, fmt.Errorf("list SQL roles: %w", err)
	}
	out := make([]SQLRole, len(rows))
	for i, r := range rows {
		out[i] = SQLRole{Name: r.RoleName, TenantID: r.TenantID, CreatedAt: r.CreatedAt,
			RotatedAt: timePtr(r.RotatedAt), Missing: !r.RoleExists}
	}
	return out, nil
}

// DropSQLRoles drops the SQL role named role, or every SQL role of tenant
// when role is "" (with both, role must be tenant's), and ends their open
// sessions.
func (adm *Admin) DropSQLRoles(ctx context.Context, actor, tenant, role string) ([]SQLRole, error) {
	if tenant == "" && role == "" {
		return nil, errors.New("drop SQL roles: name a tenant or a role")
	}
	var dropped []tenancydb.DeleteSQLRolesRow
	err := adm.ownerAuditedTx(ctx, func(tx pgx.Tx, q *tenancydb.Queries) (records []audit, err error) {
		dropped, err = q.DeleteSQLRoles(ctx, tenancydb.DeleteSQLRolesParams{
			RoleName: pgtype.Text{String: role, Valid: role != ""}, TenantID: pgtype.Text{String: tenant, Valid: tenant != ""},
		})
		if err != nil {
			return nil, err
		}
		if len(dropped) == 0 {
			return nil, ErrNoSQLRole
		}
		for _, d := range dropped {
			if _, err := tx.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{d.RoleName}.Sanitize()); err != nil {
				return nil, privilegeHint(fmt.Errorf("drop role %s: %w", d.RoleName, err))
			}
			records = append(records, audit{actor: actor, action: "sqlrole.drop", tenant: d.TenantID, target: d.RoleName})
		}
		return records, nil
	})
	if err != nil {
		return nil, fmt.Errorf("drop SQL roles (tenant %q, role %q): %w", tenant, role, err)
	}
	out := make([]SQLRole, len(dropped))
	for i, d := range dropped {
		out[i] = SQLRole{Name: d.RoleName, TenantID: d.TenantID, Missing: d.RoleOid.Uint32 == 0}
		if !out[i].Missing {
			out[i].Unended = adm.endSessions(ctx, d.RoleOid)
		}
	}
	return out, nil
}

// endSessionsOf ends the open sessions of role; see endSessions.
func (adm *Admin) endSessionsOf(ctx context.Context, role string) int {
	bctx, cancel := adm.bounded(ctx)
	oid, err := adm.owner().PGRoleOID(bctx, role)
	cancel()
	if err != nil {
		adm.log.Warn("end the sessions of a SQL role", "role", role, "err", err)
		return -1
	}
	return adm.endSessions(ctx, oid)
}

// endSessions ends the sessions of the role with oid (which may be
// dropped already) and returns how many did not end, or -1 when they
// could not be signalled (the role cardbox connects as is not a
// superuser, nor in pg_signal_backend) or Postgres did not answer within
// the bound (Bound).
func (adm *Admin) endSessions(ctx context.Context, oid pgtype.Uint32) int {
	ctx, cancel := adm.bounded(ctx)
	defer cancel()
	n, err := adm.owner().EndRoleSessions(ctx, oid)
	if err != nil {
		adm.log.Warn("end the sessions of a SQL role", "oid", oid.Uint32, "err", err)
		return -1
	}
	return int(n)
}
