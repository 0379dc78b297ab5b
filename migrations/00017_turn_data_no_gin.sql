-- The GIN index on turn_data.data cost every projected turn an index entry
-- per path of its JSON, on the two cores appends share with the projector
-- (docs/performance.md, SQL analytics); no example query uses it. An
-- analyst who wants containment queries can create it:
--   CREATE INDEX turn_data_data ON turn_data USING gin (data jsonb_path_ops);

-- +goose Up
DROP INDEX turn_data_data;

-- +goose Down
CREATE INDEX turn_data_data ON turn_data USING gin (data jsonb_path_ops);
