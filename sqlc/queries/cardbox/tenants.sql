-- name: EnsureTenant :one
-- Creates the tenant on first use (dev mode projects) and returns it; a
-- deleted tenant is not created again (deleted says so).
WITH ins AS (
    INSERT INTO tenants (tenant_id) VALUES (@tenant_id)
    ON CONFLICT (tenant_id) DO NOTHING
    RETURNING tenant_id, tenant_no, false AS deleted
)
SELECT tenant_id, tenant_no, deleted FROM ins
UNION ALL
SELECT tenant_id, tenant_no, (deleted_at IS NOT NULL)::boolean FROM tenants WHERE tenant_id = @tenant_id
LIMIT 1;
