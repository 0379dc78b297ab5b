-- name: MarkContextsDeleted :many
-- Deletes contexts of the tenant (cardbox_tenant) and records who did in
-- the audit log, one record each, in one statement; the contexts that do
-- not exist or are deleted already are left out, and so are those of
-- @idle_context_ids (retention found them idle) appended to since
-- @idle_updated_ats. The turns each was forked
-- from and began with bound the scan for its own turns (see
-- ContextOwnTurns).
WITH deleted AS (
    UPDATE contexts c SET deleted_at = now()
    WHERE c.tenant_id = @tenant_id AND c.context_id = ANY(@context_ids::bigint[]) AND c.deleted_at IS NULL
      AND NOT EXISTS (
          SELECT 1
          FROM (SELECT unnest(@idle_context_ids::bigint[]) AS context_id, unnest(@idle_updated_ats::timestamptz[]) AS updated_at) i
          WHERE i.context_id = c.context_id AND c.updated_at > i.updated_at)
    RETURNING c.tenant_id, c.context_id, c.base_turn_id, c.root_turn_id
), audited AS (
    INSERT INTO audit_log (actor, action, tenant_id, target, detail)
    SELECT @actor::text, 'context.delete', d.tenant_id, d.context_id::text, @detail::jsonb FROM deleted d
)
SELECT d.context_id, d.base_turn_id, d.root_turn_id FROM deleted d ORDER BY d.context_id;

-- name: ListUnreapedContexts :many
-- Deleted contexts whose dead turns are still to be worked out (sweeper),
-- a batch at a time.
SELECT tenant_id, context_id, base_turn_id, root_turn_id, head_turn_id
FROM contexts
WHERE deleted_at IS NOT NULL AND reaped_at IS NULL
ORDER BY tenant_id, context_id
LIMIT @max_contexts;

-- name: ContextOwnTurns :many
-- The turns appended to a context (sweeper). Turn ids only grow, so none
-- is older than the turn the context was forked from, and none is newer
-- than its head: every append makes its turn the head. The bounds keep the
-- scan to the context's lifetime (there is no per-context index: it would
-- cost every append); without the upper one, every deletion scanned all
-- the turns appended since the context began. (One statement for a batch
-- of contexts, joining their bounds laterally, is planned as a scan of the
-- tenant's every turn: Postgres cannot tell how narrow each range is.)
SELECT turn_id FROM turns
WHERE tenant_id = @tenant_id AND turn_id > @after_turn_id AND turn_id <= @head_turn_id
  AND context_id = @context_id;

-- name: TurnsOfDeletedContexts :many
-- Which of the turns belong to a deleted context (sweeper).
SELECT t.turn_id FROM turns t
JOIN contexts c ON c.tenant_id = t.tenant_id AND c.context_id = t.context_id
WHERE t.tenant_id = @tenant_id AND t.turn_id = ANY(@turn_ids::bigint[]) AND c.deleted_at IS NOT NULL;

-- name: LockRollupsForBurial :exec
-- Waits for the analytics projector's batches with rows of the tenant to
-- commit, and holds off new ones until the transaction ends (see
-- HoldOffBurials; 7372 is the advisory lock class of both).
SELECT pg_advisory_xact_lock(7372, @tenant_no::integer);

-- name: BuryTurns :one
-- Records dead turns and removes their rows in one statement (sweeper):
-- idempotency keys, fs attachments, metadata, analytics rows (turn_data
-- and its tool call rows) and the turn rows; cards derived from them are deleted as a DELETE of the card
-- would (their purge removes them later). The rollups stop counting the
-- turns whose turn_data rows go (the projector counted a turn when it
-- inserted its row): their negative counts are added as ApplyRollups
-- adds (an upsert that takes the row's latest version, in the
-- projector's key order, so that a concurrent batch is neither lost nor
-- deadlocked against), and the children of their parents are recounted.
-- Returns how many turn rows went, and the days and contexts whose
-- rollup rows may be left at zero (DropEmptyRollups).
WITH dead AS (
    INSERT INTO dead_turns (tenant_id, turn_id)
    SELECT @tenant_id, unnest(@turn_ids::bigint[])
    ON CONFLICT DO NOTHING
), keys AS (
    DELETE FROM idempotency_keys WHERE tenant_id = @tenant_id AND turn_id = ANY(@turn_ids::bigint[])
), fs AS (
    DELETE FROM fs_attachments WHERE tenant_id = @tenant_id AND turn_id = ANY(@turn_ids::bigint[])
), meta AS (
    DELETE FROM turn_metadata WHERE tenant_id = @tenant_id AND turn_id = ANY(@turn_ids::bigint[])
), tools AS (
    DELETE FROM analytics_tool_call_rows WHERE tenant_id = @tenant_id AND turn_id = ANY(@turn_ids::bigint[])
), data AS (
    DELETE FROM turn_data WHERE tenant_id = @tenant_id AND turn_id = ANY(@turn_ids::bigint[])
    RETURNING turn_id, type_id, type_version, parent_turn_id, coalesce(pg_column_size(data), 0)::bigint AS data_bytes
), counted AS (
    -- The turn rows as the statement found them (the DELETE below does
    -- not change what it reads).
    SELECT d.turn_id, d.type_id, d.type_version, d.parent_turn_id, d.data_bytes, t.context_id, t.uncompressed_len,
           (t.created_at AT TIME ZONE 'UTC')::date AS day, t.idempotency_key IS NOT NULL AS keyed
    FROM data d JOIN turns t ON t.tenant_id = @tenant_id AND t.turn_id = d.turn_id
), daily AS (
    INSERT INTO analytics_daily (tenant_id, day, type_id, type_version, turns)
    SELECT @tenant_id, c.day, c.type_id, c.type_version, -count(*)
    FROM counted c GROUP BY c.day, c.type_id, c.type_version
    ORDER BY c.day, c.type_id COLLATE "C", c.type_version
    ON CONFLICT (tenant_id, day, type_id, type_version) DO UPDATE SET turns = analytics_daily.turns + excluded.turns
    RETURNING day
), keyed AS (
    INSERT INTO analytics_keyed (tenant_id, context_id, day, keyed_appends)
    SELECT @tenant_id, c.context_id, c.day, -count(*)
    FROM counted c WHERE c.keyed GROUP BY c.context_id, c.day
    ORDER BY c.context_id, c.day
    ON CONFLICT (tenant_id, context_id, day) DO UPDATE SET keyed_appends = analytics_keyed.keyed_appends + excluded.keyed_appends
    RETURNING context_id
), parents AS (
    -- Every child of a dead turn is dead (a live one would keep it
    -- alive): only the live parents of dead turns keep a row.
    SELECT p.turn_id,
           (SELECT count(*) FROM turn_data k
            WHERE k.tenant_id = @tenant_id AND k.parent_turn_id = p.turn_id AND k.turn_id <> ALL(@turn_ids::bigint[])) AS children
    FROM (SELECT DISTINCT c.parent_turn_id AS turn_id FROM counted c
          WHERE c.parent_turn_id <> 0 AND c.parent_turn_id <> ALL(@turn_ids::bigint[])) p
), recounted AS (
    UPDATE analytics_children ch SET children = p.children
    FROM parents p WHERE ch.tenant_id = @tenant_id AND ch.turn_id = p.turn_id AND p.children > 1
), uncounted AS (
    DELETE FROM analytics_children ch
    WHERE ch.tenant_id = @tenant_id
      AND (ch.turn_id = ANY(@turn_ids::bigint[]) OR ch.turn_id IN (SELECT p.turn_id FROM parents p WHERE p.children < 2))
), used AS (
    INSERT INTO analytics_usage (tenant_id, turns, payload_bytes, data_bytes)
    SELECT @tenant_id, -count(*), -coalesce(sum(c.uncompressed_len), 0), -coalesce(sum(c.data_bytes), 0)
    FROM counted c HAVING count(*) > 0
    ON CONFLICT (tenant_id) DO UPDATE
    SET turns = analytics_usage.turns + excluded.turns, payload_bytes = analytics_usage.payload_bytes + excluded.payload_bytes,
        data_bytes = analytics_usage.data_bytes + excluded.data_bytes
), derived AS (
    UPDATE cards SET deleted_at = now()
    WHERE tenant_id = @tenant_id AND cxdb_turn_id = ANY(@turn_ids::bigint[]) AND deleted_at IS NULL
), gone AS (
    DELETE FROM turns tu WHERE tu.tenant_id = @tenant_id AND tu.turn_id = ANY(@turn_ids::bigint[])
    RETURNING tu.turn_id
)
SELECT (SELECT count(*) FROM gone)::bigint AS turns,
       coalesce((SELECT array_agg(DISTINCT day) FROM daily), '{}')::date[] AS days,
       coalesce((SELECT array_agg(DISTINCT context_id) FROM keyed), '{}')::bigint[] AS keyed_context_ids;

-- name: DropEmptyRollups :exec
-- Removes the rollup rows BuryTurns left at zero (sweeper, in its
-- transaction), so that the rollups are those of a store where the dead
-- turns were never appended. The days and contexts bound the scan to the
-- rows it touched.
WITH daily AS (
    DELETE FROM analytics_daily a
    WHERE a.tenant_id = @tenant_id AND a.day = ANY(@days::date[]) AND a.turns <= 0
), keyed AS (
    DELETE FROM analytics_keyed k
    WHERE k.tenant_id = @tenant_id AND k.context_id = ANY(@keyed_context_ids::bigint[]) AND k.keyed_appends <= 0
)
DELETE FROM analytics_usage u WHERE u.tenant_id = @tenant_id AND u.turns <= 0;

-- name: MarkContextsReaped :exec
-- The contexts' dead turns are buried (sweeper); their per-context
-- analytics rows go with them.
WITH counts AS (
    DELETE FROM analytics_context_turns
    WHERE tenant_id = @tenant_id AND context_id = ANY(@context_ids::bigint[])
)
UPDATE contexts c SET reaped_at = now()
WHERE c.tenant_id = @tenant_id AND c.context_id = ANY(@context_ids::bigint[]);

-- name: ListDeadTurnsDied :many
-- Every dead turn and when it died (recovery skips their records and
-- counts their bytes as dead until a compaction drops them; cardbox
-- verify counts their records apart from damage).
SELECT turn_id, died_at FROM dead_turns;

-- name: CountDeletedContexts :one
-- How many contexts of live tenants are deleted (cardbox verify).
SELECT count(*) FROM contexts c JOIN tenants t USING (tenant_id)
WHERE c.deleted_at IS NOT NULL AND t.deleted_at IS NULL;

-- name: DeadTurnsAmong :many
-- Which of the turns are dead (compaction drops their records). A
-- segment's turns are many (two million in 256 MiB) and dead_turns is
-- keyed by tenant first: a join lets Postgres hash one side rather than
-- search the array once per dead turn.
SELECT d.turn_id FROM dead_turns d
JOIN unnest(@turn_ids::bigint[]) AS u(turn_id) ON u.turn_id = d.turn_id;
