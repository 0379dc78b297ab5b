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
