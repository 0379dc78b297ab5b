-- The projector no longer reads each turn's row back (its caller gives
-- the fields the rollups count by); it leaves out the rows of deleted
-- tenants by reading their deletion mark instead.

-- +goose Up
GRANT SELECT (deleted_at) ON tenants TO cardbox_projector;

-- +goose Down
REVOKE SELECT (deleted_at) ON tenants FROM cardbox_projector;
