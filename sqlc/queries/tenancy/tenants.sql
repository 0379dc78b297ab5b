-- name: GetTenant :one
-- A live tenant: a deleted one is not found, like one that never existed.
SELECT tenant_id, tenant_no FROM tenants WHERE tenant_id = @tenant_id AND deleted_at IS NULL;
