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

-- name: PlanRetention :many
-- What the policies would delete at @now, by tenant (administration,
-- cardbox retention plan): the contexts, and the turns appended to them
-- with their payload bytes. Turns a live context still reaches (a fork's
-- base chain) stay, so these are upper bounds.
WITH policies AS (
    SELECT tenant_id, label, idle_seconds, max_age_seconds FROM retention_policies
    UNION ALL
    SELECT tn.tenant_id, '', sqlc.narg(default_idle_seconds)::bigint, sqlc.narg(default_max_age_seconds)::bigint
    FROM tenants tn
    WHERE (sqlc.narg(default_idle_seconds)::bigint IS NOT NULL OR sqlc.narg(default_max_age_seconds)::bigint IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM retention_policies own WHERE own.tenant_id = tn.tenant_id AND own.label = '')
), expired AS (
    SELECT DISTINCT c.tenant_id, c.context_id
    FROM contexts c
    JOIN tenants tn ON tn.tenant_id = c.tenant_id AND tn.deleted_at IS NULL
    JOIN policies p ON p.tenant_id = c.tenant_id
    LEFT JOIN turn_metadata m ON m.tenant_id = c.tenant_id AND m.turn_id = c.root_turn_id
    WHERE c.deleted_at IS NULL
      AND (sqlc.arg(tenant_id)::text = '' OR c.tenant_id = sqlc.arg(tenant_id)::text)
      AND (p.label = '' OR p.label = ANY(m.labels))
      AND (c.updated_at < sqlc.arg(now)::timestamptz - (p.idle_seconds * interval '1 second')
        OR c.created_at < sqlc.arg(now)::timestamptz - (p.max_age_seconds * interval '1 second'))
)
SELECT e.tenant_id,
       count(DISTINCT e.context_id)::bigint AS contexts,
       count(t.turn_id)::bigint AS turns,
       coalesce(sum(t.uncompressed_len), 0)::bigint AS bytes
FROM expired e
LEFT JOIN turns t ON t.tenant_id = e.tenant_id AND t.context_id = e.context_id
GROUP BY e.tenant_id
ORDER BY e.tenant_id;

-- name: SetRetentionPolicy :exec
-- Sets a tenant's policy for a label (empty: all its contexts).
INSERT INTO retention_policies (tenant_id, label, idle_seconds, max_age_seconds)
VALUES (@tenant_id, @label, sqlc.narg(idle_seconds), sqlc.narg(max_age_seconds))
ON CONFLICT (tenant_id, label) DO UPDATE
SET idle_seconds = excluded.idle_seconds, max_age_seconds = excluded.max_age_seconds, updated_at = now();

-- name: ClearRetentionPolicy :execrows
-- Removes a tenant's policy for a label.
DELETE FROM retention_policies WHERE tenant_id = @tenant_id AND label = @label;

-- name: ListRetentionPolicies :many
-- Every policy, of one tenant or (empty) of all.
SELECT tenant_id, label, idle_seconds, max_age_seconds, updated_at
FROM retention_policies
WHERE sqlc.arg(tenant_id)::text = '' OR tenant_id = sqlc.arg(tenant_id)::text
ORDER BY tenant_id, label;

-- name: RetentionProgress :one
-- How far the deletion of a tenant's contexts has come (administration,
-- cardbox bench-retention): its live contexts labelled @label (whose first
-- turn's metadata the server has read), its deleted contexts, and those
-- of them whose dead turns are not buried yet; and the backend's process
-- id, whose parent is the cluster's postmaster (for the CPU Postgres
-- spends).
SELECT
    (SELECT count(*) FROM contexts c
     JOIN turn_metadata m ON m.tenant_id = c.tenant_id AND m.turn_id = c.root_turn_id
     WHERE c.tenant_id = @tenant_id::text AND c.deleted_at IS NULL AND @label::text = ANY(m.labels))::bigint AS labelled_live,
    (SELECT count(*) FROM contexts d
     WHERE d.tenant_id = @tenant_id::text AND d.deleted_at IS NOT NULL)::bigint AS deleted,
    (SELECT count(*) FROM contexts u
     WHERE u.tenant_id = @tenant_id::text AND u.deleted_at IS NOT NULL AND u.reaped_at IS NULL)::bigint AS unreaped,
    pg_backend_pid()::integer AS backend_pid;
