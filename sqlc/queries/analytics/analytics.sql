-- name: InsertTurnData :many
-- Inserts the first projection of each turn, and returns per tenant the
-- rows and the bytes of data written. Like UpsertTurnData, ApplyRollups
-- and WriteToolCalls, it runs in a batch's transaction after
-- PlanEachBatch and HoldOffTenantDeletion, and writes rows of live
-- tenants only: a tenant deleted before the batch is left out, one
-- deleted after removes the rows. data and skipped are '' for NULL; the
-- turns' fields are the caller's (as the store committed them), so that
-- no turn row is read back. A plain insert: it fails
-- (unique_violation) when a turn has a row already (projected meanwhile
-- by catch-up), and the caller writes the batch with UpsertTurnData.
WITH ins AS (
    INSERT INTO turn_data (tenant_id, turn_id, type_id, type_version, data, skipped, registry_generation, parent_turn_id)
    SELECT i.tenant_id, i.turn_id, i.type_id, i.type_version, NULLIF(i.data, '')::jsonb, NULLIF(i.skipped, ''), i.generation,
           i.parent_turn_id
    FROM (SELECT unnest(@tenant_ids::text[]) AS tenant_id,
                 unnest(@turn_ids::bigint[]) AS turn_id,
                 unnest(@type_ids::text[]) AS type_id,
                 unnest(@type_versions::bigint[]) AS type_version,
                 unnest(@datas::text[]) AS data,
                 unnest(@skipped::text[]) AS skipped,
                 unnest(@generations::bigint[]) AS generation,
                 unnest(@parent_turn_ids::bigint[]) AS parent_turn_id) i
    WHERE i.tenant_id IN (SELECT n.tenant_id FROM tenants n
                          WHERE n.tenant_id IN (SELECT DISTINCT unnest(@tenant_ids::text[])) AND n.deleted_at IS NULL)
    RETURNING turn_data.tenant_id, pg_column_size(turn_data.data) AS bytes
)
SELECT tenant_id, count(*) AS turns, coalesce(sum(bytes), 0)::bigint AS data_bytes FROM ins GROUP BY tenant_id;

-- name: UpsertTurnData :many
-- Writes projections of turns that may have a row: a re-projection
-- replaces the row unless that was projected with a newer registry.
-- Returns each row written, whether it was inserted, and the bytes of
-- data it added. The old row's size is found by a primary-key probe
-- (LATERAL ... LIMIT 1), whatever the statistics say.
WITH input AS (
    SELECT i.tenant_id, i.turn_id, i.type_id, i.type_version, i.data, i.skipped, i.generation, i.parent_turn_id,
           o.bytes AS old_bytes
    FROM (SELECT unnest(@tenant_ids::text[]) AS tenant_id,
                 unnest(@turn_ids::bigint[]) AS turn_id,
                 unnest(@type_ids::text[]) AS type_id,
                 unnest(@type_versions::bigint[]) AS type_version,
                 unnest(@datas::text[]) AS data,
                 unnest(@skipped::text[]) AS skipped,
                 unnest(@generations::bigint[]) AS generation,
                 unnest(@parent_turn_ids::bigint[]) AS parent_turn_id) i
    LEFT JOIN LATERAL (
        SELECT pg_column_size(d.data) AS bytes
        FROM turn_data d WHERE d.tenant_id = i.tenant_id AND d.turn_id = i.turn_id LIMIT 1) o ON true
    WHERE i.tenant_id IN (SELECT n.tenant_id FROM tenants n
                          WHERE n.tenant_id IN (SELECT DISTINCT unnest(@tenant_ids::text[])) AND n.deleted_at IS NULL)
),
up AS (
    INSERT INTO turn_data (tenant_id, turn_id, type_id, type_version, data, skipped, registry_generation, parent_turn_id)
    SELECT i.tenant_id, i.turn_id, i.type_id, i.type_version, NULLIF(i.data, '')::jsonb, NULLIF(i.skipped, ''), i.generation,
           i.parent_turn_id
    FROM input i
    ON CONFLICT (tenant_id, turn_id) DO UPDATE
    SET type_id = excluded.type_id, type_version = excluded.type_version, data = excluded.data,
        skipped = excluded.skipped, registry_generation = excluded.registry_generation, projected_at = now()
    WHERE turn_data.registry_generation <= excluded.registry_generation
    RETURNING turn_data.tenant_id, turn_data.turn_id, (xmax = 0) AS inserted, pg_column_size(turn_data.data) AS bytes
)
SELECT up.tenant_id, up.turn_id, up.inserted, (coalesce(up.bytes, 0) - coalesce(i.old_bytes, 0))::bigint AS added_bytes
FROM up JOIN input i ON i.tenant_id = up.tenant_id AND i.turn_id = up.turn_id;

-- name: ApplyRollups :exec
-- Adds a batch's counts to the rollups. analytics_children has a row only
-- for a turn with more than one child: the parents of the batch's
-- inserted turns have their children counted from turn_data's parent
-- index (the batch's rows included: they were written before).
WITH daily AS (
    INSERT INTO analytics_daily (tenant_id, day, type_id, type_version, turns)
    SELECT unnest(@daily_tenant_ids::text[]), unnest(@daily_days::date[]), unnest(@daily_type_ids::text[]),
           unnest(@daily_type_versions::bigint[]), unnest(@daily_turns::bigint[])
    ON CONFLICT (tenant_id, day, type_id, type_version) DO UPDATE SET turns = analytics_daily.turns + excluded.turns
),
context_turns AS (
    INSERT INTO analytics_context_turns (tenant_id, context_id, turns)
    SELECT unnest(@context_tenant_ids::text[]), unnest(@context_ids::bigint[]), unnest(@context_turns::bigint[])
    ON CONFLICT (tenant_id, context_id) DO UPDATE SET turns = analytics_context_turns.turns + excluded.turns
),
keyed AS (
    INSERT INTO analytics_keyed (tenant_id, context_id, day, keyed_appends)
    SELECT unnest(@keyed_tenant_ids::text[]), unnest(@keyed_context_ids::bigint[]), unnest(@keyed_days::date[]),
           unnest(@keyed_appends::bigint[])
    ON CONFLICT (tenant_id, context_id, day) DO UPDATE SET keyed_appends = analytics_keyed.keyed_appends + excluded.keyed_appends
),
children AS (
    INSERT INTO analytics_children (tenant_id, turn_id, children)
    SELECT p.tenant_id, p.turn_id, c.children
    FROM (SELECT unnest(@parent_tenant_ids::text[]) AS tenant_id, unnest(@parent_turn_ids::bigint[]) AS turn_id) p
    CROSS JOIN LATERAL (
        SELECT count(*) AS children FROM turn_data c
        WHERE c.tenant_id = p.tenant_id AND c.parent_turn_id = p.turn_id) c
    WHERE c.children > 1
    ON CONFLICT (tenant_id, turn_id) DO UPDATE SET children = excluded.children
)
INSERT INTO analytics_usage (tenant_id, turns, payload_bytes, data_bytes)
SELECT unnest(@usage_tenant_ids::text[]), unnest(@usage_turns::bigint[]), unnest(@usage_payload_bytes::bigint[]),
       unnest(@usage_data_bytes::bigint[])
ON CONFLICT (tenant_id) DO UPDATE
SET turns = analytics_usage.turns + excluded.turns, payload_bytes = analytics_usage.payload_bytes + excluded.payload_bytes,
    data_bytes = analytics_usage.data_bytes + excluded.data_bytes;

-- name: WriteToolCalls :exec
-- Extracts the tool calls of rows just written from their data, and
-- removes those a rewritten row no longer has. Casts never fail: a value
-- that is not a number is NULL.
WITH rows AS (
    SELECT d.tenant_id, d.turn_id, d.data
    FROM (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@turn_ids::bigint[]) AS turn_id) w
    CROSS JOIN LATERAL (
        SELECT d.tenant_id, d.turn_id, d.data FROM turn_data d
        WHERE d.tenant_id = w.tenant_id AND d.turn_id = w.turn_id LIMIT 1) d
),
calls AS (
    SELECT r.tenant_id, r.turn_id, (c.ord - 1)::integer AS idx, 'assistant_turn'::text AS source,
           c.v ->> 'id' AS call_id, c.v ->> 'name' AS name, c.v ->> 'status' AS status,
           (coalesce(c.v ->> 'status' = 'error', false) OR coalesce(jsonb_typeof(c.v -> 'error') = 'object', false)
            OR coalesce(c.v -> 'result' ->> 'success' = 'false', false)) AS failed,
           c.v -> 'error' ->> 'message' AS error_message, c.v ->> 'duration_ms' AS duration
    FROM rows r CROSS JOIN LATERAL jsonb_array_elements(
        CASE WHEN jsonb_typeof(r.data -> 'turn' -> 'tool_calls') = 'array' THEN r.data -> 'turn' -> 'tool_calls' ELSE '[]'::jsonb END
    ) WITH ORDINALITY AS c(v, ord)
    WHERE r.data ->> 'item_type' = 'assistant_turn'
    UNION ALL
    SELECT r.tenant_id, r.turn_id, 0, 'tool_call', r.data -> 'tool_call' ->> 'call_id', r.data -> 'tool_call' ->> 'name',
           r.data ->> 'status', false, NULL, NULL
    FROM rows r WHERE r.data ->> 'item_type' = 'tool_call'
    UNION ALL
    SELECT r.tenant_id, r.turn_id, 0, 'tool_result', r.data -> 'tool_result' ->> 'call_id', NULL, r.data ->> 'status',
           coalesce(r.data -> 'tool_result' ->> 'is_error' = 'true', false),
           CASE WHEN r.data -> 'tool_result' ->> 'is_error' = 'true' THEN r.data -> 'tool_result' ->> 'content' END,
           r.data -> 'tool_result' ->> 'duration_ms'
    FROM rows r WHERE r.data ->> 'item_type' = 'tool_result'
),
new_calls AS (
    INSERT INTO analytics_tool_call_rows (tenant_id, turn_id, idx, source, call_id, name, status, failed, error_message, duration_ms)
    SELECT tenant_id, turn_id, idx, source, call_id, name, status, failed, error_message,
           CASE WHEN duration ~ '^-?[0-9]{1,18}$' THEN duration::bigint END
    FROM calls
    ON CONFLICT (tenant_id, turn_id, idx) DO UPDATE
    SET source = excluded.source, call_id = excluded.call_id, name = excluded.name, status = excluded.status,
        failed = excluded.failed, error_message = excluded.error_message, duration_ms = excluded.duration_ms
)
DELETE FROM analytics_tool_call_rows r USING rows w
WHERE r.tenant_id = w.tenant_id AND r.turn_id = w.turn_id
  AND r.idx >= (SELECT count(*) FROM calls c WHERE c.tenant_id = w.tenant_id AND c.turn_id = w.turn_id);

-- name: PlanEachBatch :exec
-- Makes Postgres plan each batch with its own arrays until the
-- transaction ends. A cached generic plan guesses ten rows per array, and
-- joins UpsertTurnData's CTEs by nested loops: seconds for a 2,048-turn
-- batch instead of tens of milliseconds.
SELECT set_config('plan_cache_mode', 'force_custom_plan', true);

-- name: HoldOffTenantDeletion :exec
-- Holds off, until the transaction ends, the deletion of the tenants a
-- batch writes rows of: a deletion takes the same advisory lock
-- exclusively (LockTenantAgainstProjection) before it removes anything,
-- so it either comes first, and the batch's next statement finds the
-- tenant's turns gone, or second, and finds and removes the batch's rows.
-- 7371 is cardbox's advisory lock class for tenant deletion.
SELECT pg_advisory_xact_lock_shared(7371, n) FROM unnest(@tenant_nos::integer[]) AS n;

-- name: HoldOffBurials :exec
-- Holds off, until the transaction ends, the burial of the tenants' dead
-- turns (the reaper's BuryTurns, which takes the same advisory lock
-- exclusively): both add to the same rollup rows (analytics_daily,
-- analytics_usage, analytics_children, ...) in one statement each, whose
-- order of row locks Postgres does not promise, so the two deadlocked.
-- Taken shared, it leaves the projector's batches free beside each other.
-- 7372 is cardbox's advisory lock class for a tenant's rollups.
SELECT pg_advisory_xact_lock_shared(7372, n) FROM unnest(@tenant_nos::integer[]) AS n;

-- name: ProjectorTenants :many
-- Every live tenant with the turn its catch-up starts after. A deleted
-- tenant's rows are gone, and what a deletion's writes in flight add after
-- it is purged, not projected.
SELECT n.tenant_id, n.tenant_no, coalesce(w.turn_id, 0)::bigint AS watermark
FROM tenants n LEFT JOIN analytics_watermarks w ON w.tenant_id = n.tenant_id
WHERE n.deleted_at IS NULL
ORDER BY n.tenant_no;

-- name: ScanTurnsAfter :many
-- The next turns of a tenant after its watermark, in id order, each with
-- whether it has a turn_data row.
SELECT t.turn_id, t.type_id, t.type_version, t.uncompressed_len, t.created_at,
       t.context_id, t.parent_turn_id, (t.idempotency_key IS NOT NULL)::boolean AS keyed,
       EXISTS (SELECT 1 FROM turn_data d WHERE d.tenant_id = t.tenant_id AND d.turn_id = t.turn_id) AS projected
FROM turns t
WHERE t.tenant_id = @tenant_id AND t.turn_id > @after
ORDER BY t.turn_id
LIMIT @max;

-- name: SetWatermark :exec
INSERT INTO analytics_watermarks (tenant_id, turn_id) VALUES (@tenant_id, @turn_id)
ON CONFLICT (tenant_id) DO UPDATE SET turn_id = greatest(analytics_watermarks.turn_id, excluded.turn_id), updated_at = now();

-- name: SupersedeBackfills :exec
-- A backfill for a newer generation covers the older ones of the tenant.
UPDATE analytics_backfills SET done_at = now(), updated_at = now()
WHERE tenant_id = @tenant_id AND generation < @generation AND done_at IS NULL;

-- name: StartBackfill :one
-- Records a re-projection of a tenant's turns for a registry generation
-- (or finds the one a crash interrupted) and returns where it stands.
WITH ins AS (
    INSERT INTO analytics_backfills (tenant_id, generation) VALUES (@tenant_id, @generation)
    ON CONFLICT (tenant_id, generation) DO NOTHING
    RETURNING after_turn_id, reprojected, done_at
)
SELECT after_turn_id, reprojected, (done_at IS NOT NULL)::boolean AS done FROM ins
UNION ALL
SELECT after_turn_id, reprojected, (done_at IS NOT NULL)::boolean FROM analytics_backfills
WHERE tenant_id = @tenant_id AND generation = @generation
LIMIT 1;

-- name: PendingBackfills :many
-- Re-projections a crash or a restart interrupted.
SELECT tenant_id, generation FROM analytics_backfills WHERE done_at IS NULL ORDER BY tenant_id, generation;

-- name: BackfillPage :many
-- The next rows of a tenant a bundle may have changed: projected with an
-- older registry, and of a registered type or skipped as unknown; each
-- with its turn's fields.
SELECT d.turn_id, d.type_id, d.type_version, coalesce(d.data::text, '')::text AS data, coalesce(d.skipped, '')::text AS skipped,
       t.uncompressed_len, t.created_at, t.context_id, t.parent_turn_id, (t.idempotency_key IS NOT NULL)::boolean AS keyed
FROM turn_data d
CROSS JOIN LATERAL (
    SELECT t.uncompressed_len, t.created_at, t.context_id, t.parent_turn_id, t.idempotency_key
    FROM turns t WHERE t.tenant_id = d.tenant_id AND t.turn_id = d.turn_id LIMIT 1) t
WHERE d.tenant_id = @tenant_id AND d.turn_id > @after AND d.registry_generation < @generation
  AND (d.skipped = 'unknown_type' OR d.type_id = ANY(@type_ids::text[]))
ORDER BY d.turn_id
LIMIT @max;

-- name: AdvanceBackfill :exec
UPDATE analytics_backfills
SET after_turn_id = @after_turn_id, reprojected = reprojected + @reprojected, updated_at = now(),
    done_at = CASE WHEN @done::boolean THEN now() END
WHERE tenant_id = @tenant_id AND generation = @generation;

-- name: BackfillRemaining :one
-- How many rows a backfill has left to look at (for progress).
SELECT count(*) FROM turn_data
WHERE tenant_id = @tenant_id AND turn_id > @after AND registry_generation < @generation
  AND (skipped = 'unknown_type' OR type_id = ANY(@type_ids::text[]));

-- name: RunningBackfills :many
-- The re-projections not finished, with how far they went.
SELECT tenant_id, generation, after_turn_id, reprojected FROM analytics_backfills
WHERE done_at IS NULL ORDER BY tenant_id, generation;
