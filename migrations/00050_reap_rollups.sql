-- The reaper takes dead turns out of the analytics rollups in the
-- statement that removes their turn_data rows: it adds their negative
-- counts to analytics_daily, analytics_keyed and analytics_usage (the
-- projector's upsert, so that a concurrent projector batch is neither
-- lost nor double-counted), recounts analytics_children of their
-- parents, and removes the rows left at zero.

-- +goose Up
GRANT SELECT, INSERT, UPDATE, DELETE ON analytics_daily, analytics_keyed, analytics_usage TO cardbox_sweeper;
GRANT SELECT, UPDATE, DELETE ON analytics_children TO cardbox_sweeper;

-- +goose Down
REVOKE SELECT, INSERT, UPDATE, DELETE ON analytics_daily, analytics_keyed, analytics_usage FROM cardbox_sweeper;
REVOKE SELECT, UPDATE, DELETE ON analytics_children FROM cardbox_sweeper;
