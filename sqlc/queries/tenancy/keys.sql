-- name: CreateTenant :one
-- Creates a tenant; no row when it exists already.
INSERT INTO tenants (tenant_id, name) VALUES (@tenant_id, @name)
ON CONFLICT (tenant_id) DO NOTHING
RETURNING tenant_id, tenant_no, name, created_at;

-- name: ListTenantsFull :many
SELECT t.tenant_id, t.tenant_no, t.name, t.created_at,
       (SELECT count(*) FROM api_keys k
         WHERE k.tenant_id = t.tenant_id AND k.revoked_at IS NULL
           AND (k.expires_at IS NULL OR k.expires_at > now()))::bigint AS live_keys
FROM tenants t WHERE t.deleted_at IS NULL ORDER BY t.tenant_no;

-- name: LockLiveTenant :one
-- A live tenant, its row locked against a concurrent deletion until the
-- transaction ends (a deletion waiting for it then removes what it adds;
-- one it waited for leaves no row).
SELECT tenant_no FROM tenants WHERE tenant_id = @tenant_id AND deleted_at IS NULL FOR SHARE;

-- name: CreateKey :exec
-- An operator key has no tenant (NULL tenant_id).
INSERT INTO api_keys (key_id, tenant_id, role, secret_hash, expires_at)
VALUES (@key_id, sqlc.narg('tenant_id'), @role, @secret_hash, sqlc.narg('expires_at'));

-- name: GetKey :one
-- A key with its tenant's number; an operator key has neither tenant nor
-- number, a key of a deleted tenant is not found.
SELECT k.key_id, k.tenant_id, t.tenant_no, k.role, k.secret_hash, k.expires_at, k.revoked_at
FROM api_keys k LEFT JOIN tenants t ON t.tenant_id = k.tenant_id
WHERE k.key_id = @key_id AND (k.tenant_id IS NULL OR t.deleted_at IS NULL);

-- name: ListKeys :many
-- Keys of one tenant, or of all (operator keys too) when tenant_id is NULL.
SELECT key_id, tenant_id, role, created_at, expires_at, revoked_at
FROM api_keys
WHERE sqlc.narg('tenant_id')::text IS NULL OR tenant_id = sqlc.narg('tenant_id')
ORDER BY created_at, key_id;

-- name: RevokeKey :one
-- Revokes a key (of tenant_id only, when it is not NULL); no row when
-- there is no such key or it was revoked already.
UPDATE api_keys SET revoked_at = now()
WHERE key_id = @key_id AND revoked_at IS NULL
  AND (sqlc.narg('tenant_id')::text IS NULL OR tenant_id = sqlc.narg('tenant_id'))
RETURNING key_id, tenant_id, role, created_at, expires_at, revoked_at;

-- name: NotifyKeysChanged :exec
-- Tells every server to forget cached keys and close the sessions of
-- revoked ones (see internal/auth).
SELECT pg_notify('cardbox_keys', @key_id::text);

-- name: AddAudit :exec
INSERT INTO audit_log (actor, action, tenant_id, target, detail)
VALUES (@actor, @action, sqlc.narg('tenant_id'), @target, @detail);

-- name: ListAudit :many
SELECT audit_id, at, actor, action, tenant_id, target, detail
FROM audit_log
WHERE sqlc.narg('tenant_id')::text IS NULL OR tenant_id = sqlc.narg('tenant_id')
ORDER BY audit_id DESC
LIMIT @max_rows;

-- name: SetTenantRate :one
-- Sets (or, with NULLs, clears) a tenant's rate limit; no row when the
-- tenant does not exist.
UPDATE tenants SET rate_per_sec = sqlc.narg('rate_per_sec'), rate_burst = sqlc.narg('rate_burst')
WHERE tenant_id = @tenant_id AND deleted_at IS NULL
RETURNING tenant_id;

-- name: GetTenantRate :one
SELECT rate_per_sec, rate_burst FROM tenants WHERE tenant_id = @tenant_id AND deleted_at IS NULL;
