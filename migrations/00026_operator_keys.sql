-- Operator keys: keys of no tenant that administer the service (tenants,
-- every tenant's keys, quotas, rates, usage, the audit log, /metrics) and
-- read or write no tenant's data. Until now an admin key was both a
-- tenant's key and the service's, so one tenant's admin administered every
-- tenant; admin keys now administer their own tenant only (internal/auth).
--
-- An operator key has no tenant_id, and only an operator key lacks one.
-- Its row is invisible to the request role (cardbox_tenant's policy
-- compares tenant_id with the statement's tenant: NULL matches nothing);
-- the lookup and admin paths see every row, as before.

-- +goose Up
ALTER TABLE api_keys ALTER COLUMN tenant_id DROP NOT NULL;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_check
    CHECK (role IN ('operator', 'admin', 'writer', 'reader', 'analyst'));
ALTER TABLE api_keys ADD CONSTRAINT api_keys_operator_has_no_tenant
    CHECK ((role = 'operator') = (tenant_id IS NULL));
COMMENT ON COLUMN api_keys.tenant_id IS
    'the tenant the key belongs to; NULL for an operator key, which administers the service and belongs to no tenant';

-- +goose Down
-- Operator keys cannot be expressed before this migration: they go.
DELETE FROM api_keys WHERE role = 'operator';
COMMENT ON COLUMN api_keys.tenant_id IS NULL;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_operator_has_no_tenant;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_check
    CHECK (role IN ('admin', 'writer', 'reader', 'analyst'));
ALTER TABLE api_keys ALTER COLUMN tenant_id SET NOT NULL;
