-- Context assembly: zones and positions in boxes, snapshots of boxes,
-- content hashes and token counts of cards, and the link of a card
-- derived from a CXDB turn to that turn.
--
-- A box that uses zones and positions keeps its entries as parallel
-- arrays beside card_ids, in the same order (zone, then position): one
-- row per box, so that an edit is one row update under the box's row
-- lock, as an append is. entry_ids is NULL for a box that uses none of
-- it (a plain list, answered as before). positions are fractional
-- index keys compared bytewise (COLLATE "C" order, done in Go).
--
-- A snapshot copies a box's entries (ids and positions only: cards are
-- immutable) into box_snapshots; it goes with its box when the box is
-- purged.
--
-- content_hash is BLAKE3 over the card's content as canonical JSON,
-- token_counts the card's token count per tokenizer name; both are
-- computed once, when the card is written (cards written before this
-- migration have neither: their counts are computed when assembled, and
-- they are not found by hash).
--
-- cxdb_context_id and cxdb_turn_id name the CXDB turn a card was
-- derived from. CXDB has no deletion of turns yet; when it gets one (or
-- contexts expire), it soft-deletes the cards whose cxdb_turn_id is the
-- turn's (index cards_cxdb_turn), in the same transaction.

-- +goose Up
ALTER TABLE boxes
    ADD COLUMN entry_ids  text[],
    ADD COLUMN zones      smallint[],
    ADD COLUMN positions  text[],
    ADD COLUMN drafts     boolean[],
    ADD COLUMN entry_seq  bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT boxes_entries_parallel CHECK (
        entry_ids IS NULL
        OR (cardinality(entry_ids) = cardinality(card_ids) AND cardinality(zones) = cardinality(card_ids)
            AND cardinality(positions) = cardinality(card_ids) AND cardinality(drafts) = cardinality(card_ids)));

ALTER TABLE cards
    ADD COLUMN content_hash    bytea,
    ADD COLUMN token_counts    jsonb,
    ADD COLUMN cxdb_context_id bigint,
    ADD COLUMN cxdb_turn_id    bigint;
CREATE INDEX cards_content_hash ON cards (tenant_id, content_hash) WHERE content_hash IS NOT NULL;
CREATE INDEX cards_cxdb_turn ON cards (tenant_id, cxdb_turn_id) WHERE cxdb_turn_id IS NOT NULL;

CREATE TABLE box_snapshots (
    tenant_id   text NOT NULL,
    box_id      text NOT NULL,
    snapshot_id text NOT NULL CHECK (snapshot_id <> ''),
    entry_ids   text[] NOT NULL,
    card_ids    text[] NOT NULL,
    zones       smallint[] NOT NULL,
    positions   text[] NOT NULL,
    drafts      boolean[] NOT NULL,
    metadata    jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, box_id, snapshot_id),
    FOREIGN KEY (tenant_id, box_id) REFERENCES boxes (tenant_id, box_id) ON DELETE CASCADE
);
GRANT SELECT, INSERT, DELETE ON box_snapshots TO cardbox_tenant;
GRANT SELECT, DELETE ON box_snapshots TO cardbox_sweeper, cardbox_admin;
SELECT cardbox_protect_tenant_table('box_snapshots',
    ARRAY['cardbox_committer', 'cardbox_recovery', 'cardbox_sweeper', 'cardbox_lookup', 'cardbox_admin']);

-- +goose Down
DROP TABLE box_snapshots;
DROP INDEX cards_cxdb_turn;
DROP INDEX cards_content_hash;
ALTER TABLE cards DROP COLUMN content_hash, DROP COLUMN token_counts,
    DROP COLUMN cxdb_context_id, DROP COLUMN cxdb_turn_id;
ALTER TABLE boxes DROP CONSTRAINT boxes_entries_parallel, DROP COLUMN entry_ids, DROP COLUMN zones,
    DROP COLUMN positions, DROP COLUMN drafts, DROP COLUMN entry_seq;
