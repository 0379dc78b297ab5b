-- +goose Up
-- A compaction swaps a sealed segment for its rewrite, in the recovery
-- role that seals segments: one UPDATE of the segment's row names the
-- new generation, its length and BLAKE3. A rewrite of a segment whose
-- records are all dead holds nothing: its length is 0.
GRANT UPDATE ON sealed_segments TO cardbox_recovery;
ALTER TABLE sealed_segments DROP CONSTRAINT sealed_segments_length_check,
    ADD CONSTRAINT sealed_segments_length_check CHECK (length > 0 OR generation > 0);

-- +goose Down
ALTER TABLE sealed_segments DROP CONSTRAINT sealed_segments_length_check,
    ADD CONSTRAINT sealed_segments_length_check CHECK (length > 0);
REVOKE UPDATE ON sealed_segments FROM cardbox_recovery;
