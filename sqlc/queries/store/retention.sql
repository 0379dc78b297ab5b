-- Retention: the contexts a tenant's policies expire. The policy of the
-- empty label applies to all the tenant's contexts, another label's to
-- those whose labels (their chain's root metadata) hold it; a context
-- expires when any policy that applies expires it, so the shortest wins.
-- A null duration expires nothing (the comparison is null).
--
-- The server's default (@default_idle_seconds, @default_max_age_seconds;
-- both null: none) stands in for the empty label's policy of every tenant
-- that has none of its own: a tenant's own policy for all its contexts
-- wins over it, and label policies apply beside it as beside their own.

-- name: ListExpiredContexts :many
-- A batch of live contexts the policies expire at @now (sweeper), with
-- their last append as seen (updated_at) and whether their age expires
-- them: one only idle is deleted only if no append came since
-- (MarkContextsDeleted).
WITH policies AS (
    SELECT tenant_id, label, idle_seconds, max_age_seconds FROM retention_policies
    UNION ALL
    SELECT tn.tenant_id, '', sqlc.narg(default_idle_seconds)::bigint, sqlc.narg(default_max_age_seconds)::bigint
    FROM tenants tn
    WHERE (sqlc.narg(default_idle_seconds)::bigint IS NOT NULL OR sqlc.narg(default_max_age_seconds)::bigint IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM retention_policies own WHERE own.tenant_id = tn.tenant_id AND own.label = '')
)
SELECT c.tenant_id, c.context_id, c.updated_at,
       coalesce(bool_or(c.created_at < sqlc.arg(now)::timestamptz - (p.max_age_seconds * interval '1 second')), false)::boolean AS by_age
FROM contexts c
JOIN tenants tn ON tn.tenant_id = c.tenant_id AND tn.deleted_at IS NULL
JOIN policies p ON p.tenant_id = c.tenant_id
LEFT JOIN turn_metadata m ON m.tenant_id = c.tenant_id AND m.turn_id = c.root_turn_id
WHERE c.deleted_at IS NULL
  AND (p.label = '' OR p.label = ANY(m.labels))
  AND (c.updated_at < sqlc.arg(now)::timestamptz - (p.idle_seconds * interval '1 second')
    OR c.created_at < sqlc.arg(now)::timestamptz - (p.max_age_seconds * interval '1 second'))
GROUP BY c.tenant_id, c.context_id, c.updated_at
ORDER BY c.tenant_id, c.context_id
LIMIT @max_contexts;
