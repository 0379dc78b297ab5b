-- Hosted mode: API keys and the audit log of tenant and key administration.

-- +goose Up
-- A key belongs to one tenant and has one role. Only a hash of its secret
-- is kept: SHA-256 is enough because secrets are 256 random bits (no
-- dictionary to guess from). key_id is public (it is part of the secret's
-- text, so a lookup is by id and the hash is then compared).
CREATE TABLE api_keys (
    key_id      text PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (tenant_id),
    role        text NOT NULL CHECK (role IN ('admin', 'writer', 'reader', 'analyst')),
    secret_hash bytea NOT NULL CHECK (length(secret_hash) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz,
    revoked_at  timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

-- Who did what to which tenant or key, and when. Never a secret.
CREATE TABLE audit_log (
    audit_id  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT now(),
    actor     text NOT NULL,
    action    text NOT NULL,
    tenant_id text,
    target    text NOT NULL DEFAULT '',
    detail    jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_tenant_at ON audit_log (tenant_id, at);

-- +goose Down
DROP TABLE audit_log;
DROP TABLE api_keys;
