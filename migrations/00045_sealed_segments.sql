-- +goose Up
-- The closed segments of the blob pack and the turn log whose bytes are
-- all committed, each with its length and BLAKE3: sealed. A sealed
-- segment never changes but by a compaction, which replaces its row (and
-- the pack's holes in it) in the transaction that swaps its file for the
-- rewrite. Store-wide: a segment holds many tenants' records.
CREATE TABLE sealed_segments (
    store_id     uuid NOT NULL REFERENCES turn_stores (store_id),
    stream       text NOT NULL CHECK (stream IN ('blobs', 'turns')),
    start_offset bigint NOT NULL CHECK (start_offset >= 0),
    generation   integer NOT NULL CHECK (generation >= 0),
    length       bigint NOT NULL CHECK (length > 0),
    blake3       bytea NOT NULL CHECK (length(blake3) = 32),
    sealed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (store_id, stream, start_offset)
);

-- The store seals segments (and checks them at start-up) in the recovery
-- role; cardbox recover forgets the turn log's when it rebuilds it.
GRANT SELECT, INSERT, DELETE ON sealed_segments TO cardbox_recovery;

-- +goose Down
DROP TABLE sealed_segments;
