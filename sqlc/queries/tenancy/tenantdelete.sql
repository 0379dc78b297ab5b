-- Deleting a tenant: one transaction marks it deleted, then its rows go
-- in batches; its tenants row stays as a tombstone (see
-- migrations/00014_tenant_delete.sql).
--
-- The tables a tenant owns rows of are listed three times below, in
-- CountTenantRows, PurgeDeletedTenants and PurgeDeletedTenantBatch; a new
-- table with a tenant_id column belongs in each (internal/tenancy's tests
-- fail until it is).

-- name: LockTenantForDelete :one
-- Locks a live tenant's row for its deletion: writes in flight that
-- checked it (foreign keys hold a share lock) commit first, and new ones
-- wait for the deletion to end.
SELECT tenant_no FROM tenants WHERE tenant_id = @tenant_id AND deleted_at IS NULL FOR UPDATE;

-- name: LockTenantAgainstProjection :exec
-- Waits for the analytics projector's batches with rows of the tenant to
-- commit, and holds off new ones until the transaction ends (see
-- HoldOffTenantDeletion; 7371 is the advisory lock class of both).
SELECT pg_advisory_xact_lock(7371, @tenant_no::integer);

-- name: MarkTenantDeleted :exec
UPDATE tenants SET deleted_at = now(), rate_per_sec = NULL, rate_burst = NULL
WHERE tenant_id = @tenant_id AND deleted_at IS NULL;

-- name: NotifyTenantKeysDeleted :exec
-- Tells every server that each key of the tenant is gone, as a
-- revocation does (see NotifyKeysChanged): their sessions are closed.
SELECT pg_notify('cardbox_keys', key_id) FROM api_keys WHERE tenant_id = @tenant_id::text;

-- name: NotifyTenantDeleted :exec
-- Tells every server to forget the tenant: memory, caches, sessions (see
-- internal/tenancy's WatchTenants).
SELECT pg_notify('cardbox_tenants', @tenant_id::text);

-- name: DeletedTenant :one
-- The number of a deleted tenant (no row for a live or unknown one).
SELECT tenant_no FROM tenants WHERE tenant_id = @tenant_id AND deleted_at IS NOT NULL;

-- name: ListDeletedTenants :many
SELECT tenant_id, tenant_no FROM tenants WHERE deleted_at IS NOT NULL ORDER BY tenant_no;

-- name: CountTenantRows :many
-- How many rows of each table a tenant owns: what its deletion would
-- remove.
SELECT 'contexts'::text AS table_name, count(*)::bigint AS row_count FROM contexts WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'turns', count(*) FROM turns WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'turn_metadata', count(*) FROM turn_metadata WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'fs_attachments', count(*) FROM fs_attachments WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'idempotency_keys', count(*) FROM idempotency_keys WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'turn_types', count(*) FROM turn_types WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'tenant_blobs', count(*) FROM tenant_blobs WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'registry_bundles', count(*) FROM registry_bundles WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'cards', count(*) FROM cards WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'boxes', count(*) FROM boxes WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'box_snapshots', count(*) FROM box_snapshots WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'api_keys', count(*) FROM api_keys WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'sql_roles', count(*) FROM sql_roles WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'tenant_usage', count(*) FROM tenant_usage WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'cardbox_usage_log', count(*) FROM cardbox_usage_log WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'turn_data', count(*) FROM turn_data WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'analytics_daily', count(*) FROM analytics_daily WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'analytics_children', count(*) FROM analytics_children WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'analytics_usage', count(*) FROM analytics_usage WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'analytics_context_turns', count(*) FROM analytics_context_turns WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'analytics_keyed', count(*) FROM analytics_keyed WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'analytics_tool_call_rows', count(*) FROM analytics_tool_call_rows WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'analytics_watermarks', count(*) FROM analytics_watermarks WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'analytics_backfills', count(*) FROM analytics_backfills WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'dead_turns', count(*) FROM dead_turns WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'released_blob_claims', count(*) FROM released_blob_claims WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'blob_puts', count(*) FROM blob_puts WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'blob_claim_reviews', count(*) FROM blob_claim_reviews WHERE tenant_id = @tenant_id::text
UNION ALL SELECT 'retention_policies', count(*) FROM retention_policies WHERE tenant_id = @tenant_id::text;

-- name: PurgeDeletedTenants :many
-- Removes every row of the deleted tenant @tenant_id (of every deleted
-- tenant when NULL) and returns how many rows of each table went, in the
-- order of CountTenantRows. Only tenants marked deleted are touched, so a
-- live tenant's rows can never be removed by it. The foreign keys are NO
-- ACTION, checked at the end of the statement, when parents and children
-- are gone alike. The tenants' rows are locked before their cards', as
-- card writes lock them (00024_lock_tenants_first).
WITH gone AS MATERIALIZED (
    SELECT tenant_id FROM tenants
    WHERE deleted_at IS NOT NULL
      AND (sqlc.narg('tenant_id')::text IS NULL OR tenant_id = sqlc.narg('tenant_id')::text)
    ORDER BY tenant_id
    FOR NO KEY UPDATE
),
del_contexts AS (
    DELETE FROM contexts x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_turns AS (
    DELETE FROM turns x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_turn_metadata AS (
    DELETE FROM turn_metadata x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_fs_attachments AS (
    DELETE FROM fs_attachments x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_idempotency_keys AS (
    DELETE FROM idempotency_keys x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_turn_types AS (
    DELETE FROM turn_types x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_tenant_blobs AS (
    DELETE FROM tenant_blobs x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_registry_bundles AS (
    DELETE FROM registry_bundles x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_cards AS (
    DELETE FROM cards x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_boxes AS (
    DELETE FROM boxes x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_box_snapshots AS (
    DELETE FROM box_snapshots x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_api_keys AS (
    DELETE FROM api_keys x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_sql_roles AS (
    DELETE FROM sql_roles x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_tenant_usage AS (
    DELETE FROM tenant_usage x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_cardbox_usage_log AS (
    DELETE FROM cardbox_usage_log x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_turn_data AS (
    DELETE FROM turn_data x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_analytics_daily AS (
    DELETE FROM analytics_daily x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_analytics_children AS (
    DELETE FROM analytics_children x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_analytics_usage AS (
    DELETE FROM analytics_usage x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_analytics_context_turns AS (
    DELETE FROM analytics_context_turns x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_analytics_keyed AS (
    DELETE FROM analytics_keyed x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_analytics_tool_call_rows AS (
    DELETE FROM analytics_tool_call_rows x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_analytics_watermarks AS (
    DELETE FROM analytics_watermarks x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_analytics_backfills AS (
    DELETE FROM analytics_backfills x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_dead_turns AS (
    DELETE FROM dead_turns x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_released_blob_claims AS (
    DELETE FROM released_blob_claims x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_blob_puts AS (
    DELETE FROM blob_puts x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_blob_claim_reviews AS (
    DELETE FROM blob_claim_reviews x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
),
del_retention_policies AS (
    DELETE FROM retention_policies x USING gone WHERE x.tenant_id = gone.tenant_id RETURNING 1
)
SELECT 'contexts'::text AS table_name, count(*)::bigint AS row_count FROM del_contexts
UNION ALL SELECT 'turns', count(*) FROM del_turns
UNION ALL SELECT 'turn_metadata', count(*) FROM del_turn_metadata
UNION ALL SELECT 'fs_attachments', count(*) FROM del_fs_attachments
UNION ALL SELECT 'idempotency_keys', count(*) FROM del_idempotency_keys
UNION ALL SELECT 'turn_types', count(*) FROM del_turn_types
UNION ALL SELECT 'tenant_blobs', count(*) FROM del_tenant_blobs
UNION ALL SELECT 'registry_bundles', count(*) FROM del_registry_bundles
UNION ALL SELECT 'cards', count(*) FROM del_cards
UNION ALL SELECT 'boxes', count(*) FROM del_boxes
UNION ALL SELECT 'box_snapshots', count(*) FROM del_box_snapshots
UNION ALL SELECT 'api_keys', count(*) FROM del_api_keys
UNION ALL SELECT 'sql_roles', count(*) FROM del_sql_roles
UNION ALL SELECT 'tenant_usage', count(*) FROM del_tenant_usage
UNION ALL SELECT 'cardbox_usage_log', count(*) FROM del_cardbox_usage_log
UNION ALL SELECT 'turn_data', count(*) FROM del_turn_data
UNION ALL SELECT 'analytics_daily', count(*) FROM del_analytics_daily
UNION ALL SELECT 'analytics_children', count(*) FROM del_analytics_children
UNION ALL SELECT 'analytics_usage', count(*) FROM del_analytics_usage
UNION ALL SELECT 'analytics_context_turns', count(*) FROM del_analytics_context_turns
UNION ALL SELECT 'analytics_keyed', count(*) FROM del_analytics_keyed
UNION ALL SELECT 'analytics_tool_call_rows', count(*) FROM del_analytics_tool_call_rows
UNION ALL SELECT 'analytics_watermarks', count(*) FROM del_analytics_watermarks
UNION ALL SELECT 'analytics_backfills', count(*) FROM del_analytics_backfills
UNION ALL SELECT 'dead_turns', count(*) FROM del_dead_turns
UNION ALL SELECT 'released_blob_claims', count(*) FROM del_released_blob_claims
UNION ALL SELECT 'blob_puts', count(*) FROM del_blob_puts
UNION ALL SELECT 'blob_claim_reviews', count(*) FROM del_blob_claim_reviews
UNION ALL SELECT 'retention_policies', count(*) FROM del_retention_policies;

-- name: PurgeDeletedTenantBatch :one
-- Removes at most @batch rows of each table of the deleted tenant
-- @tenant_id and returns how many went in all: 0 when none is left, or
-- when another purge holds the tenant's row (it removes the rest). A
-- parent row (of contexts, turns, turn_data) goes only once no child row
-- of it is left, so that each batch, a statement of its own, satisfies
-- the foreign keys: a deletion's statements are each bounded by
-- --pg-timeout, however large the tenant. The tables are those of
-- PurgeDeletedTenants.
WITH gone AS MATERIALIZED (
    SELECT tenant_id FROM tenants
    WHERE tenant_id = @tenant_id::text AND deleted_at IS NOT NULL
    FOR NO KEY UPDATE SKIP LOCKED
),
del_contexts AS (
    DELETE FROM contexts WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM contexts p JOIN gone USING (tenant_id)
        WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.tenant_id = p.tenant_id AND t.context_id = p.context_id)
          AND NOT EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.tenant_id = p.tenant_id AND k.context_id = p.context_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_turns AS (
    DELETE FROM turns WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM turns p JOIN gone USING (tenant_id)
        WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.tenant_id = p.tenant_id AND k.turn_id = p.turn_id)
          AND NOT EXISTS (SELECT 1 FROM fs_attachments a WHERE a.tenant_id = p.tenant_id AND a.turn_id = p.turn_id)
          AND NOT EXISTS (SELECT 1 FROM turn_metadata m WHERE m.tenant_id = p.tenant_id AND m.turn_id = p.turn_id)
          AND NOT EXISTS (SELECT 1 FROM turn_data d WHERE d.tenant_id = p.tenant_id AND d.turn_id = p.turn_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_turn_metadata AS (
    DELETE FROM turn_metadata WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM turn_metadata p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_fs_attachments AS (
    DELETE FROM fs_attachments WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM fs_attachments p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_idempotency_keys AS (
    DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM idempotency_keys p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_turn_types AS (
    DELETE FROM turn_types WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM turn_types p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_tenant_blobs AS (
    DELETE FROM tenant_blobs WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM tenant_blobs p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_registry_bundles AS (
    DELETE FROM registry_bundles WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM registry_bundles p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_cards AS (
    DELETE FROM cards WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM cards p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_boxes AS (
    DELETE FROM boxes WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM boxes p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_box_snapshots AS (
    DELETE FROM box_snapshots WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM box_snapshots p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_api_keys AS (
    DELETE FROM api_keys WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM api_keys p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_sql_roles AS (
    DELETE FROM sql_roles WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM sql_roles p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_tenant_usage AS (
    DELETE FROM tenant_usage WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM tenant_usage p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_cardbox_usage_log AS (
    DELETE FROM cardbox_usage_log WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM cardbox_usage_log p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_turn_data AS (
    DELETE FROM turn_data WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM turn_data p JOIN gone USING (tenant_id)
        WHERE NOT EXISTS (SELECT 1 FROM analytics_tool_call_rows r WHERE r.tenant_id = p.tenant_id AND r.turn_id = p.turn_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_analytics_daily AS (
    DELETE FROM analytics_daily WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM analytics_daily p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_analytics_children AS (
    DELETE FROM analytics_children WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM analytics_children p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_analytics_usage AS (
    DELETE FROM analytics_usage WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM analytics_usage p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_analytics_context_turns AS (
    DELETE FROM analytics_context_turns WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM analytics_context_turns p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_analytics_keyed AS (
    DELETE FROM analytics_keyed WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM analytics_keyed p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_analytics_tool_call_rows AS (
    DELETE FROM analytics_tool_call_rows WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM analytics_tool_call_rows p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_analytics_watermarks AS (
    DELETE FROM analytics_watermarks WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM analytics_watermarks p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_analytics_backfills AS (
    DELETE FROM analytics_backfills WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM analytics_backfills p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_dead_turns AS (
    DELETE FROM dead_turns WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM dead_turns p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_released_blob_claims AS (
    DELETE FROM released_blob_claims WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM released_blob_claims p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_blob_puts AS (
    DELETE FROM blob_puts WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM blob_puts p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_blob_claim_reviews AS (
    DELETE FROM blob_claim_reviews WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM blob_claim_reviews p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
),
del_retention_policies AS (
    DELETE FROM retention_policies WHERE ctid = ANY (ARRAY(
        SELECT p.ctid FROM retention_policies p JOIN gone USING (tenant_id)
        LIMIT @batch::integer))
    RETURNING 1
)
SELECT (
    (SELECT count(*) FROM del_contexts)
    + (SELECT count(*) FROM del_turns)
    + (SELECT count(*) FROM del_turn_metadata)
    + (SELECT count(*) FROM del_fs_attachments)
    + (SELECT count(*) FROM del_idempotency_keys)
    + (SELECT count(*) FROM del_turn_types)
    + (SELECT count(*) FROM del_tenant_blobs)
    + (SELECT count(*) FROM del_registry_bundles)
    + (SELECT count(*) FROM del_cards)
    + (SELECT count(*) FROM del_boxes)
    + (SELECT count(*) FROM del_box_snapshots)
    + (SELECT count(*) FROM del_api_keys)
    + (SELECT count(*) FROM del_sql_roles)
    + (SELECT count(*) FROM del_tenant_usage)
    + (SELECT count(*) FROM del_cardbox_usage_log)
    + (SELECT count(*) FROM del_turn_data)
    + (SELECT count(*) FROM del_analytics_daily)
    + (SELECT count(*) FROM del_analytics_children)
    + (SELECT count(*) FROM del_analytics_usage)
    + (SELECT count(*) FROM del_analytics_context_turns)
    + (SELECT count(*) FROM del_analytics_keyed)
    + (SELECT count(*) FROM del_analytics_tool_call_rows)
    + (SELECT count(*) FROM del_analytics_watermarks)
    + (SELECT count(*) FROM del_analytics_backfills)
    + (SELECT count(*) FROM del_dead_turns)
    + (SELECT count(*) FROM del_released_blob_claims)
    + (SELECT count(*) FROM del_blob_puts)
    + (SELECT count(*) FROM del_blob_claim_reviews)
    + (SELECT count(*) FROM del_retention_policies)
)::bigint AS row_count;
