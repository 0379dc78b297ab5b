-- +goose Up
-- The blob pack's committed end, recorded with each group's commit like
-- the turn log's: recovery never cuts the pack below it. NULL for commits
-- made before this column; the first start after it records the end it
-- validated.
ALTER TABLE turn_log_commits ADD COLUMN pack_end bigint;

-- Damaged regions of the blob pack that recovery found and kept (holes):
-- what they held cannot be read, everything else can. blob_hash is the
-- blob whose record it was, when the pack's index still said so.
CREATE TABLE pack_holes (
    store_id     uuid NOT NULL REFERENCES turn_stores (store_id),
    start_offset bigint NOT NULL,
    end_offset   bigint NOT NULL,
    blob_hash    bytea,
    reason       text NOT NULL,
    first_found  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (store_id, start_offset)
);

-- +goose Down
DROP TABLE pack_holes;
ALTER TABLE turn_log_commits DROP COLUMN pack_end;
