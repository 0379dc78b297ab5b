-- Analysts' SQL roles (internal/tenancy/sqlroles.go). The role DDL itself is
-- dynamic SQL there: identifiers cannot be parameters.

-- name: SetupSQLRoles :exec
-- Creates the group role cardbox_analyst if missing, and its grants and
-- policies (migration 00012); idempotent.
SELECT cardbox_sql_setup();

-- name: AnalystsCanCreate :one
-- Whether analysts could create objects in the tables' schema (PostgreSQL
-- 14 and earlier grant CREATE on public to PUBLIC), and so plant functions
-- the server's queries might resolve to.
SELECT has_schema_privilege('cardbox_analyst', current_schema(), 'CREATE')::bool AS can_create;

-- name: LockSQLRole :one
-- The record of a SQL role, locked for the change that follows.
SELECT role_name, tenant_id FROM sql_roles WHERE role_name = @role_name FOR UPDATE;

-- name: PGRoleExists :one
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = @role_name::text)::bool AS role_exists;

-- name: SQLRoleIsConfined :one
-- Whether a login role has exactly what an analyst's role gets: it logs
-- in, inherits, holds no privileged attribute and belongs to
-- cardbox_analyst and to no other role.
SELECT (r.rolcanlogin AND r.rolinherit
        AND NOT (r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls)
        AND EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.roleid
                    WHERE m.member = r.oid AND g.rolname = 'cardbox_analyst')
        AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.roleid
                        WHERE m.member = r.oid AND g.rolname <> 'cardbox_analyst'))::bool AS confined
FROM pg_catalog.pg_roles r WHERE r.rolname = @role_name::text;

-- name: AddSQLRole :one
INSERT INTO sql_roles (role_name, tenant_id) VALUES (@role_name, @tenant_id)
RETURNING role_name, tenant_id, created_at, rotated_at;

-- name: RotateSQLRole :one
UPDATE sql_roles SET rotated_at = now() WHERE role_name = @role_name
RETURNING role_name, tenant_id, created_at, rotated_at;

-- name: ListSQLRoles :many
-- SQL roles of one tenant, or of all when tenant_id is NULL; role_exists
-- is false for a record whose role was dropped outside cardbox.
SELECT s.role_name, s.tenant_id, s.created_at, s.rotated_at,
       EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = s.role_name)::bool AS role_exists
FROM sql_roles s
WHERE sqlc.narg('tenant_id')::text IS NULL OR s.tenant_id = sqlc.narg('tenant_id')
ORDER BY s.tenant_id, s.role_name;

-- name: DeleteSQLRoles :many
-- Forgets the SQL roles named (role_name) or of a tenant (tenant_id), or
-- both (the role must be the tenant's), and returns them with the oid of
-- their Postgres role (0 when it is gone already).
DELETE FROM sql_roles s
WHERE (sqlc.narg('role_name')::text IS NULL OR s.role_name = sqlc.narg('role_name'))
  AND (sqlc.narg('tenant_id')::text IS NULL OR s.tenant_id = sqlc.narg('tenant_id'))
RETURNING s.role_name, s.tenant_id,
          COALESCE((SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = s.role_name), 0)::oid AS role_oid;

-- name: PGRoleOID :one
SELECT oid FROM pg_catalog.pg_roles WHERE rolname = @role_name::text;

-- name: EndRoleSessions :one
-- Ends every session of the role with oid role_oid (it may be dropped
-- already) and returns how many did not end within 5 s.
SELECT (count(*) FILTER (WHERE NOT pg_terminate_backend(pid, 5000)))::integer AS not_ended
FROM pg_catalog.pg_stat_activity
WHERE usesysid = @role_oid::oid;
