-- A compaction of the blob pack (store/packcompaction.go).

-- name: PackDeadBlobs :many
-- Which of the blobs no tenant claims any more, each given with the
-- tenant that stored it first (its record's owner in the pack): that
-- tenant is deleted, and no tenant holds a claim to it in tenant_blobs
-- (a claim is recorded for each tenant that stored the bytes after the
-- first). tenant_blobs is searched by hash alone: a hash join, once per
-- compacted segment.
SELECT h.blob_hash::bytea AS blob_hash
FROM unnest(@blob_hashes::bytea[]) WITH ORDINALITY AS h(blob_hash, i)
JOIN unnest(@first_writers::text[]) WITH ORDINALITY AS w(first_writer, i) ON w.i = h.i
JOIN tenants t ON t.tenant_id = w.first_writer
WHERE t.deleted_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM tenant_blobs b WHERE b.blob_hash = h.blob_hash);

-- name: ForgetPackHolesIn :execrows
-- Forgets the holes recorded in a range of the pack: a compaction's
-- rewrite of the segment, swapped in by the same transaction, holds good
-- records only.
DELETE FROM pack_holes
WHERE store_id = @store_id AND start_offset >= @start_offset AND start_offset < @end_offset;
