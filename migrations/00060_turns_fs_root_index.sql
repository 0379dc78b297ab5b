-- +goose Up
-- The turns of a tenant that have an fs root, for the release of blob
-- claims (TenantFSRoots): what those roots reach is still needed. Partial,
-- so that an append without an fs root (nearly every one) does not write
-- it; an fs attachment does.
CREATE INDEX turns_tenant_fs_root ON turns (tenant_id) WHERE fs_root_hash IS NOT NULL;

-- +goose Down
DROP INDEX turns_tenant_fs_root;
