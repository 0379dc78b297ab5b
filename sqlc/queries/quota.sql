-- name: ListBlobGrants :many
-- Every blob granted to a tenant that stored it after another (the turn
-- store's usage counts them at start-up).
SELECT tn.tenant_no, g.blob_hash
FROM tenant_blobs g JOIN tenants tn USING (tenant_id);

-- name: ListBundleBytes :many
-- The bytes of each tenant's registry bundles.
SELECT tn.tenant_no, sum(octet_length(b.body))::bigint AS bytes
FROM registry_bundles b JOIN tenants tn USING (tenant_id)
GROUP BY tn.tenant_no;

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

-- name: CompactCardBoxUsage :exec
-- Folds the log of CardBox byte changes into tenant_usage (the sweeper
-- does, every pass).
SELECT compact_cardbox_usage();
