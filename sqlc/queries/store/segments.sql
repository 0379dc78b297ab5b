-- name: ListSealedSegments :many
-- The sealed segments of both files of the store, in offset order.
SELECT stream, start_offset, generation, length, blake3
FROM sealed_segments
WHERE store_id = @store_id
ORDER BY stream, start_offset;

-- name: SealSegment :exec
-- Records a closed segment whose bytes are all committed. Sealing is
-- idempotent: a segment sealed before (by an earlier start that died
-- before it knew) keeps its row.
INSERT INTO sealed_segments (store_id, stream, start_offset, generation, length, blake3)
VALUES (@store_id, @stream, @start_offset, @generation, @length, @blake3)
ON CONFLICT (store_id, stream, start_offset) DO NOTHING;

-- name: ForgetSealedSegments :exec
-- Forgets one file's sealed segments: cardbox recover rebuilds the turn
-- log as one new segment.
DELETE FROM sealed_segments WHERE store_id = @store_id AND stream = @stream;

-- name: GetSealedSegment :one
-- One sealed segment: the generation a compaction rewrites.
SELECT generation, length, blake3
FROM sealed_segments
WHERE store_id = @store_id AND stream = @stream AND start_offset = @start_offset;

-- name: SwapSealedSegment :execrows
-- Makes a compaction's rewrite the segment Postgres names, in place of
-- the generation it read: no row when that generation is no longer the
-- sealed one. From its commit on, a start keeps the rewrite and removes
-- the old file.
UPDATE sealed_segments
SET generation = @new_generation, length = @length, blake3 = @blake3, sealed_at = now()
WHERE store_id = @store_id AND stream = @stream AND start_offset = @start_offset
  AND generation = @old_generation;
