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
