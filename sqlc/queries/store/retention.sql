-- Retention: the contexts a tenant's policies expire. The policy of the
-- empty label applies to all the tenant's contexts, another label's to
-- those whose labels (their chain's root metadata) hold it; a context
-- expires when any policy that applies expires it, so the shortest wins.
-- A null duration expires nothing (the comparison is null).

-- name: ListExpiredContexts :many
-- A batch of live contexts the policies expire at @now (sweeper).
SELECT DISTINCT c.tenant_id, c.context_id
FROM contexts c
JOIN tenants tn ON tn.tenant_id = c.tenant_id AND tn.deleted_at IS NULL
JOIN retention_policies p ON p.tenant_id = c.tenant_id
LEFT JOIN turn_metadata m ON m.tenant_id = c.tenant_id AND m.turn_id = c.root_turn_id
WHERE c.deleted_at IS NULL
  AND (p.label = '' OR p.label = ANY(m.labels))
  AND (c.updated_at < sqlc.arg(now)::timestamptz - (p.idle_seconds * interval '1 second')
    OR c.created_at < sqlc.arg(now)::timestamptz - (p.max_age_seconds * interval '1 second'))
ORDER BY c.tenant_id, c.context_id
LIMIT @max_contexts;
