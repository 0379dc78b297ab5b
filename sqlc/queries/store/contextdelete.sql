-- name: MarkContextDeleted :one
-- Deletes a context of the tenant (cardbox_tenant) and records who did in
-- the audit log, in one statement; no row when it does not exist or is
-- deleted already. The turns it was forked from and began with bound the
-- scan for its own turns (see ContextOwnTurns).
WITH deleted AS (
    UPDATE contexts c SET deleted_at = now()
    WHERE c.tenant_id = @tenant_id AND c.context_id = @context_id AND c.deleted_at IS NULL
    RETURNING c.tenant_id, c.context_id, c.base_turn_id, c.root_turn_id
), audited AS (
    INSERT INTO audit_log (actor, action, tenant_id, target, detail)
    SELECT @actor::text, 'context.delete', d.tenant_id, d.context_id::text, @detail::jsonb FROM deleted d
)
SELECT d.base_turn_id, d.root_turn_id FROM deleted d;

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
-- is older than the turn the context was forked from; the bound keeps the
-- scan to the context's lifetime (there is no per-context index: it would
-- cost every append).
SELECT turn_id FROM turns
WHERE tenant_id = @tenant_id AND turn_id > @after_turn_id AND context_id = @context_id;

-- name: TurnsOfDeletedContexts :many
-- Which of the turns belong to a deleted context (sweeper).
SELECT t.turn_id FROM turns t
JOIN contexts c ON c.tenant_id = t.tenant_id AND c.context_id = t.context_id
WHERE t.tenant_id = @tenant_id AND t.turn_id = ANY(@turn_ids::bigint[]) AND c.deleted_at IS NOT NULL;

-- name: BuryTurns :execrows
-- Records dead turns and removes their rows in one statement (sweeper):
-- idempotency keys, fs attachments, metadata, analytics rows and the
-- turn rows; cards derived from them are deleted as a DELETE of the card
-- would (their purge removes them later).
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
), data AS (
    DELETE FROM turn_data WHERE tenant_id = @tenant_id AND turn_id = ANY(@turn_ids::bigint[])
), tools AS (
    DELETE FROM analytics_tool_call_rows WHERE tenant_id = @tenant_id AND turn_id = ANY(@turn_ids::bigint[])
), derived AS (
    UPDATE cards SET deleted_at = now()
    WHERE tenant_id = @tenant_id AND cxdb_turn_id = ANY(@turn_ids::bigint[]) AND deleted_at IS NULL
)
DELETE FROM turns tu WHERE tu.tenant_id = @tenant_id AND tu.turn_id = ANY(@turn_ids::bigint[]);

-- name: MarkContextsReaped :exec
-- The contexts' dead turns are buried (sweeper); their per-context
-- analytics rows go with them.
WITH counts AS (
    DELETE FROM analytics_context_turns
    WHERE tenant_id = @tenant_id AND context_id = ANY(@context_ids::bigint[])
)
UPDATE contexts c SET reaped_at = now()
WHERE c.tenant_id = @tenant_id AND c.context_id = ANY(@context_ids::bigint[]);

-- name: ListDeadTurns :many
-- Every dead turn (recovery skips their records).
SELECT turn_id FROM dead_turns;

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
