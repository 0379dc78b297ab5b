-- name: ListRegistryBundles :many
-- A tenant's bundles in publish order, to rebuild its registry.
SELECT bundle_id, body FROM registry_bundles WHERE tenant_id = @tenant_id ORDER BY seq;

-- name: InsertRegistryBundle :execrows
-- Stores a bundle the registry accepted; 0 rows when another publisher
-- stored the same id first.
INSERT INTO registry_bundles (tenant_id, bundle_id, body) VALUES (@tenant_id, @bundle_id, @body)
ON CONFLICT (tenant_id, bundle_id) DO NOTHING;


-- name: InsertTurnMetadata :exec
-- Records the metadata of a root turn and makes it the root of the
-- contexts whose chain starts there.
WITH meta AS (
    INSERT INTO turn_metadata (tenant_id, turn_id, client_tag, title, labels, provenance)
    SELECT @tenant_id, @turn_id, sqlc.narg(client_tag), sqlc.narg(title), sqlc.narg(labels)::text[], sqlc.narg(provenance)::jsonb
    WHERE @found::boolean
    ON CONFLICT (tenant_id, turn_id) DO NOTHING
)
UPDATE contexts c SET root_turn_id = @turn_id, metadata_done = true
WHERE c.tenant_id = @tenant_id AND c.context_id = ANY(@context_ids::bigint[]);

-- name: ListContextsWithoutMetadata :many
-- Contexts whose chain has a root turn whose metadata was never looked for
-- (a crash between the append and the metadata write, or a store older
-- than metadata).
SELECT t.tenant_no, c.tenant_id, c.context_id FROM contexts c JOIN tenants t USING (tenant_id)
WHERE NOT c.metadata_done AND c.head_turn_id <> 0 AND t.deleted_at IS NULL
ORDER BY c.context_id
LIMIT @max;

-- name: ContextMetadata :many
-- The metadata of the tenant's contexts that have some: the given ones,
-- or all of them when context_ids is NULL (CQL search and filters).
SELECT c.context_id, m.client_tag, m.title, m.labels, m.provenance
FROM contexts c JOIN turn_metadata m ON m.tenant_id = c.tenant_id AND m.turn_id = c.root_turn_id
WHERE c.tenant_id = @tenant_id
  AND (sqlc.narg(context_ids)::bigint[] IS NULL OR c.context_id = ANY(sqlc.narg(context_ids)::bigint[]));

-- name: ContextMetadataSizes :many
-- The bytes of the metadata of the tenant's contexts that have some (the
-- given ones, or all of them when context_ids is NULL), without loading
-- it: lists and searches load metadata in batches of bounded bytes.
SELECT c.context_id,
       (coalesce(octet_length(m.client_tag), 0) + coalesce(octet_length(m.title), 0)
        + coalesce(octet_length(array_to_string(m.labels, '')) + 8 * cardinality(m.labels), 0)
        + coalesce(octet_length(m.provenance::text), 0))::bigint AS size
FROM contexts c JOIN turn_metadata m ON m.tenant_id = c.tenant_id AND m.turn_id = c.root_turn_id
WHERE c.tenant_id = @tenant_id
  AND (sqlc.narg(context_ids)::bigint[] IS NULL OR c.context_id = ANY(sqlc.narg(context_ids)::bigint[]));

-- name: FSAttachments :many
-- The fs roots attached to any of the given turns.
SELECT turn_id, fs_root_hash FROM fs_attachments
WHERE tenant_id = @tenant_id AND turn_id = ANY(@turn_ids::bigint[]);
