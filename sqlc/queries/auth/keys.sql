-- Checking a key on a request. internal/tenancy creates, lists and
-- revokes keys with its own statements.

-- name: GetKey :one
-- A key with its tenant's number; an operator key has neither tenant nor
-- number, a key of a deleted tenant is not found.
SELECT k.key_id, k.tenant_id, t.tenant_no, k.role, k.secret_hash, k.expires_at, k.revoked_at
FROM api_keys k LEFT JOIN tenants t ON t.tenant_id = k.tenant_id
WHERE k.key_id = @key_id AND (k.tenant_id IS NULL OR t.deleted_at IS NULL);
