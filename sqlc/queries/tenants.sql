-- name: GetTenant :one
SELECT tenant_id, tenant_no FROM tenants WHERE tenant_id = @tenant_id;

-- name: EnsureTenant :one
-- Creates the tenant on first use (dev mode projects) and returns it.
WITH ins AS (
    INSERT INTO tenants (tenant_id) VALUES (@tenant_id)
    ON CONFLICT (tenant_id) DO NOTHING
    RETURNING tenant_id, tenant_no
)
SELECT tenant_id, tenant_no FROM ins
UNION ALL
SELECT tenant_id, tenant_no FROM tenants WHERE tenant_id = @tenant_id
LIMIT 1;

-- name: ListTenants :many
SELECT tenant_id, tenant_no FROM tenants ORDER BY tenant_no;
