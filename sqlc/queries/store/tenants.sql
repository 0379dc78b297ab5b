-- The turn store's reads of tenants: which are live, and the numbers of
-- every one, deleted ones too. internal/tenancy creates and deletes them
-- with its own statements.

-- name: GetTenant :one
-- A live tenant: a deleted one is not found, like one that never existed.
SELECT tenant_id, tenant_no FROM tenants WHERE tenant_id = @tenant_id AND deleted_at IS NULL;

-- name: ListTenants :many
-- Every tenant, deleted ones too: recovery must know their numbers.
SELECT tenant_id, tenant_no, (deleted_at IS NOT NULL)::boolean AS deleted, deleted_at FROM tenants ORDER BY tenant_no;

-- name: DeletedTenant :one
-- The number of a deleted tenant (no row for a live or unknown one).
SELECT tenant_no FROM tenants WHERE tenant_id = @tenant_id AND deleted_at IS NOT NULL;

-- name: ListDeletedTenants :many
SELECT tenant_id, tenant_no FROM tenants WHERE deleted_at IS NOT NULL ORDER BY tenant_no;
