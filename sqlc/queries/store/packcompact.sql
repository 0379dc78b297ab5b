-- A compaction of the blob pack (store/packcompaction.go); which blobs it
-- drops is UnclaimedBlobs (blobclaims.sql).

-- name: ForgetPackHolesIn :execrows
-- Forgets the holes recorded in a range of the pack: a compaction's
-- rewrite of the segment, swapped in by the same transaction, holds good
-- records only.
DELETE FROM pack_holes
WHERE store_id = @store_id AND start_offset >= @start_offset AND start_offset < @end_offset;
