-- Two per-turn costs of the projector's statement go (docs/performance.md,
-- SQL analytics):
--
-- The foreign key from turn_data to turns checked every projected turn
-- with a trigger and locked its turns row (FOR KEY SHARE), dirtying the
-- pages appends write. The projector's statement writes rows only for the
-- turns it finds; turns are never deleted but with their tenant, whose
-- deletion waits for the projector's batches with rows of it and removes
-- them (HoldOffTenantDeletion in sqlc/queries/analytics.sql).
--
-- The index of skipped rows made an entry for every turn of a type not in
-- the registry, for the backfills after a publish, which read a tenant's
-- rows in turn order by the primary key anyway.

-- +goose Up
ALTER TABLE turn_data DROP CONSTRAINT turn_data_tenant_id_turn_id_fkey;
DROP INDEX turn_data_skipped;

-- +goose Down
CREATE INDEX turn_data_skipped ON turn_data (tenant_id, skipped) WHERE skipped IS NOT NULL;
ALTER TABLE turn_data ADD FOREIGN KEY (tenant_id, turn_id) REFERENCES turns (tenant_id, turn_id);
