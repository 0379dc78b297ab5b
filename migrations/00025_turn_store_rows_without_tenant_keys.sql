-- A group's statement locked its contexts' rows (the head update) before
-- the foreign keys of tenant_blobs and turn_types locked their tenant's row
-- (FOR KEY SHARE, checked at the end of the statement), while a tenant's
-- deletion locks the tenant's row first and the contexts' after: an
-- append of bytes another tenant stored first, or of a type new to the
-- tenant, racing the tenant's deletion deadlocked with it, and Postgres
-- failed the deletion or the whole group, other tenants' appends with it
-- (store's TestAppendsDoNotDeadlockWithTenantDeletion).
--
-- The keys only repeated a check the turn store makes: it writes these rows
-- for tenants it has resolved, and a tenant's row is never deleted (it
-- stays as the tombstone of a deleted tenant, 00014). A row a group writes
-- while its tenant is deleted is a late row, as its turns already were
-- (turns has no key to tenants): PurgeDeletedTenants removes it. The
-- columns keep their meaning; the comments say so.

-- +goose Up
ALTER TABLE tenant_blobs DROP CONSTRAINT tenant_blobs_tenant_id_fkey;
ALTER TABLE turn_types DROP CONSTRAINT turn_types_tenant_id_fkey;
COMMENT ON COLUMN tenant_blobs.tenant_id IS
    'a tenant (tenants.tenant_id) that stored the blob; checked by the turn store, not by a foreign key, so that appends never wait for the tenant''s row';
COMMENT ON COLUMN turn_types.tenant_id IS
    'the tenant (tenants.tenant_id) whose turns use the type; checked by the turn store, not by a foreign key, so that appends never wait for the tenant''s row';

-- +goose Down
COMMENT ON COLUMN turn_types.tenant_id IS NULL;
COMMENT ON COLUMN tenant_blobs.tenant_id IS NULL;
ALTER TABLE turn_types ADD CONSTRAINT turn_types_tenant_id_fkey
    FOREIGN KEY (tenant_id) REFERENCES tenants (tenant_id);
ALTER TABLE tenant_blobs ADD CONSTRAINT tenant_blobs_tenant_id_fkey
    FOREIGN KEY (tenant_id) REFERENCES tenants (tenant_id);
