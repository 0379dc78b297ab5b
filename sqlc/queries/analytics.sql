-- name: UpsertTurnData :exec
-- Writes a batch of projected turns in one statement, and keeps the
-- rollups: a turn counts once, when its row is first inserted (a second
-- projection of it updates the row and counts nothing). data and skipped
-- are '' for NULL. A row projected with a newer registry is never
-- replaced by one projected with an older registry. Each turn's rows in
-- turns and turn_data are found by a primary-key probe (LATERAL ...
-- LIMIT 1), whatever the statistics say: a hash join would read every
-- turn of the table for each batch. It runs after
-- HoldOffTenantDeletion, in the same transaction: a tenant deleted before
-- has no turns left to find.
WITH input AS (
    SELECT i.tenant_id, i.turn_id, i.type_id, i.type_version, i.data, i.skipped, i.generation,
           t.context_id, t.parent_turn_id, t.declared_type_id, t.declared_type_version, t.uncompressed_len,
           t.keyed, t.day, o.bytes AS old_bytes
    FROM (SELECT unnest(@tenant_ids::text[]) AS tenant_id,
                 unnest(@turn_ids::bigint[]) AS turn_id,
                 unnest(@type_ids::text[]) AS type_id,
                 unnest(@type_versions::bigint[]) AS type_version,
                 unnest(@datas::text[]) AS data,
                 unnest(@skipped::text[]) AS skipped,
                 unnest(@generations::bigint[]) AS generation) i
    CROSS JOIN LATERAL (
        SELECT t.context_id, t.parent_turn_id, t.type_id AS declared_type_id, t.type_version AS declared_type_version,
               t.uncompressed_len, (t.idempotency_key IS NOT NULL) AS keyed, (t.created_at AT TIME ZONE 'UTC')::date AS day
        FROM turns t WHERE t.tenant_id = i.tenant_id AND t.turn_id = i.turn_id LIMIT 1) t
    LEFT JOIN LATERAL (
        SELECT pg_column_size(d.data) AS bytes
        FROM turn_data d WHERE d.tenant_id = i.tenant_id AND d.turn_id = i.turn_id LIMIT 1) o ON true
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
    RETURNING turn_data.tenant_id, turn_data.turn_id, (xmax = 0) AS inserted, pg_column_size(turn_data.data) AS bytes,
              turn_data.data
),
written AS (
    SELECT up.tenant_id, up.turn_id, up.inserted, coalesce(up.bytes, 0) - coalesce(i.old_bytes, 0) AS added_bytes,
           i.context_id, i.parent_turn_id, i.declared_type_id AS type_id, i.declared_type_version AS type_version,
           i.uncompressed_len, i.keyed, i.day
    FROM up
    JOIN input i ON i.tenant_id = up.tenant_id AND i.turn_id = up.turn_id
),
daily AS (
    INSERT INTO analytics_daily (tenant_id, day, type_id, type_version, turns)
    SELECT tenant_id, day, type_id, type_version, count(*) FROM written WHERE inserted
    GROUP BY tenant_id, day, type_id, type_version
    ON CONFLICT (tenant_id, day, type_id, type_version) DO UPDATE SET turns = analytics_daily.turns + excluded.turns
),
-- Only turns with more than one child have a row: when a turn gets
-- children, those it had are counted from turn_data's parent index (a
-- probe that finds nothing for a turn's first child, the common case).
parents AS (
    SELECT tenant_id, parent_turn_id AS turn_id, count(*) AS added
    FROM written WHERE inserted AND parent_turn_id <> 0
    GROUP BY tenant_id, parent_turn_id
),
children AS (
    INSERT INTO analytics_children (tenant_id, turn_id, children)
    SELECT p.tenant_id, p.turn_id, p.added + b.before
    FROM parents p
    CROSS JOIN LATERAL (
        SELECT count(*) AS before FROM turn_data c
        WHERE c.tenant_id = p.tenant_id AND c.parent_turn_id = p.turn_id) b
    WHERE p.added + b.before > 1
    ON CONFLICT (tenant_id, turn_id) DO UPDATE SET children = excluded.children
),
context_turns AS (
    INSERT INTO analytics_context_turns (tenant_id, context_id, turns)
    SELECT tenant_id, context_id, count(*) FROM written WHERE inserted GROUP BY tenant_id, context_id
    ON CONFLICT (tenant_id, context_id) DO UPDATE SET turns = analytics_context_turns.turns + excluded.turns
),
keyed AS (
    INSERT INTO analytics_keyed (tenant_id, context_id, day, keyed_appends)
    SELECT tenant_id, context_id, day, count(*) FROM written WHERE inserted AND keyed GROUP BY tenant_id, context_id, day
    ON CONFLICT (tenant_id, context_id, day) DO UPDATE SET keyed_appends = analytics_keyed.keyed_appends + excluded.keyed_appends
),
-- Tool calls, from every row written (a re-projection may add or change
-- them). Casts never fail: a value that is not a number is NULL.
calls AS (
    SELECT up.tenant_id, up.turn_id, (c.ord - 1)::integer AS idx, 'assistant_turn'::text AS source,
           c.v ->> 'id' AS call_id, c.v ->> 'name' AS name, c.v ->> 'status' AS status,
           (coalesce(c.v ->> 'status' = 'error', false) OR coalesce(jsonb_typeof(c.v -> 'error') = 'object', false)
            OR coalesce(c.v -> 'result' ->> 'success' = 'false', false)) AS failed,
           c.v -> 'error' ->> 'message' AS error_message, c.v ->> 'duration_ms' AS duration
    FROM up CROSS JOIN LATERAL jsonb_array_elements(
        CASE WHEN jsonb_typeof(up.data -> 'turn' -> 'tool_calls') = 'array' THEN up.data -> 'turn' -> 'tool_calls' ELSE '[]'::jsonb END
    ) WITH ORDINALITY AS c(v, ord)
    WHERE up.data ->> 'item_type' = 'assistant_turn'
    UNION ALL
    SELECT up.tenant_id, up.turn_id, 0, 'tool_call', up.data -> 'tool_call' ->> 'call_id', up.data -> 'tool_call' ->> 'name',
           up.data ->> 'status', false, NULL, NULL
    FROM up WHERE up.data ->> 'item_type' = 'tool_call'
    UNION ALL
    SELECT up.tenant_id, up.turn_id, 0, 'tool_result', up.data -> 'tool_result' ->> 'call_id', NULL, up.data ->> 'status',
           coalesce(up.data -> 'tool_result' ->> 'is_error' = 'true', false),
           CASE WHEN up.data -> 'tool_result' ->> 'is_error' = 'true' THEN up.data -> 'tool_result' ->> 'content' END,
           up.data -> 'tool_result' ->> 'duration_ms'
    FROM up WHERE up.data ->> 'item_type' = 'tool_result'
),
new_calls AS (
    INSERT INTO analytics_tool_call_rows (tenant_id, turn_id, idx, source, call_id, name, status, failed, error_message, duration_ms)
    SELECT tenant_id, turn_id, idx, source, call_id, name, status, failed, error_message,
           CASE WHEN duration ~ '^-?[0-9]{1,18}$' THEN duration::bigint END
    FROM calls
    ON CONFLICT (tenant_id, turn_id, idx) DO UPDATE
    SET source = excluded.source, call_id = excluded.call_id, name = excluded.name, status = excluded.status,
        failed = excluded.failed, error_message = excluded.error_message, duration_ms = excluded.duration_ms
),
stale_calls AS (
    -- a rewritten row's calls past its new count
    DELETE FROM analytics_tool_call_rows r USING up
    WHERE NOT up.inserted AND r.tenant_id = up.tenant_id AND r.turn_id = up.turn_id
      AND r.idx >= (SELECT count(*) FROM calls c WHERE c.tenant_id = up.tenant_id AND c.turn_id = up.turn_id)
)
INSERT INTO analytics_usage (tenant_id, turns, payload_bytes, data_bytes)
SELECT tenant_id, count(*) FILTER (WHERE inserted), coalesce(sum(uncompressed_len) FILTER (WHERE inserted), 0), sum(added_bytes)
FROM written GROUP BY tenant_id
ON CONFLICT (tenant_id) DO UPDATE
SET turns = analytics_usage.turns + excluded.turns, payload_bytes = analytics_usage.payload_bytes + excluded.payload_bytes,
    data_bytes = analytics_usage.data_bytes + excluded.data_bytes;

-- name: HoldOffTenantDeletion :exec
-- Holds off, until the transaction ends, the deletion of the tenants a
-- batch writes rows of: a deletion takes the same advisory lock
-- exclusively (LockTenantAgainstProjection) before it removes anything,
-- so it either comes first, and the batch's next statement finds the
-- tenant's turns gone, or second, and finds and removes the batch's rows.
-- 7371 is cardbox's advisory lock class for tenant deletion.
SELECT pg_advisory_xact_lock_shared(7371, n) FROM unnest(@tenant_nos::integer[]) AS n;

-- name: ProjectorTenants :many
-- Every tenant with the turn its catch-up starts after.
SELECT n.tenant_id, n.tenant_no, coalesce(w.turn_id, 0)::bigint AS watermark
FROM tenants n LEFT JOIN analytics_watermarks w ON w.tenant_id = n.tenant_id
ORDER BY n.tenant_no;

-- name: ScanTurnsAfter :many
-- The next turns of a tenant after its watermark, in id order, each with
-- whether it has a turn_data row.
SELECT t.turn_id, t.type_id, t.type_version, t.uncompressed_len, t.created_at,
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
-- older registry, and of a registered type or skipped as unknown.
SELECT turn_id, type_id, type_version, coalesce(data::text, '')::text AS data, coalesce(skipped, '')::text AS skipped
FROM turn_data
WHERE tenant_id = @tenant_id AND turn_id > @after AND registry_generation < @generation
  AND (skipped = 'unknown_type' OR type_id = ANY(@type_ids::text[]))
ORDER BY turn_id
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
