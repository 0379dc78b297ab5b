-- name: GetTenantQuota :one
-- A tenant's own quota (NULL: the server's default) and the bytes of its
-- cards and boxes (compacted, and logged since).
SELECT t.quota_bytes,
       (coalesce(u.cardbox_bytes, 0)
        + coalesce((SELECT sum(l.bytes) FROM cardbox_usage_log l WHERE l.tenant_id = t.tenant_id), 0))::bigint AS cardbox_bytes
FROM tenants t LEFT JOIN tenant_usage u USING (tenant_id)
WHERE t.tenant_id = @tenant_id;

-- name: SetTenantQuota :one
-- Sets (or, with NULL, clears) a tenant's quota; no row when the tenant
-- does not exist.
UPDATE tenants SET quota_bytes = sqlc.narg('quota_bytes')
WHERE tenant_id = @tenant_id
RETURNING tenant_id;

-- name: ListTenantQuotas :many
-- Every tenant's own quota and the bytes of its cards and boxes.
SELECT t.tenant_id, t.quota_bytes,
       (coalesce(u.cardbox_bytes, 0)
        + coalesce((SELECT sum(l.bytes) FROM cardbox_usage_log l WHERE l.tenant_id = t.tenant_id), 0))::bigint AS cardbox_bytes
FROM tenants t LEFT JOIN tenant_usage u USING (tenant_id)
ORDER BY t.tenant_no;
