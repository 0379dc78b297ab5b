-- name: QueueBlobClaimReviews :exec
-- Queues the blobs some dead turns name, their payloads and fs roots, for
-- the release of the tenant's claims (sweeper, in the transaction that
-- buries them, before their rows go).
INSERT INTO blob_claim_reviews (tenant_id, blob_hash, fs_root)
SELECT DISTINCT @tenant_id::text, h.blob_hash, h.fs_root
FROM turns t
CROSS JOIN LATERAL (VALUES (t.payload_hash, false), (t.fs_root_hash, true)) AS h(blob_hash, fs_root)
WHERE t.tenant_id = @tenant_id AND t.turn_id = ANY(@turn_ids::bigint[]) AND h.blob_hash IS NOT NULL
ON CONFLICT DO NOTHING;

-- name: ListBlobClaimReviewTenants :many
-- Tenants with blobs due for review at @now (sweeper), but those skipped.
SELECT DISTINCT tenant_id FROM blob_claim_reviews
WHERE not_before <= @now AND tenant_id <> ALL(@skip::text[])
ORDER BY tenant_id LIMIT @max_tenants;

-- name: ListBlobClaimReviews :many
-- A batch of a tenant's queued blobs due for review at @now (sweeper).
SELECT blob_hash, fs_root FROM blob_claim_reviews
WHERE tenant_id = @tenant_id AND not_before <= @now
ORDER BY blob_hash, fs_root
LIMIT @max_reviews;

-- name: NextBlobClaimReview :one
-- When the next deferred review falls due (sweeper); the epoch: none.
SELECT coalesce(min(not_before), 'epoch')::timestamptz AS not_before FROM blob_claim_reviews WHERE not_before > @now;

-- name: DeferBlobClaimReviews :exec
-- Reviews whose blobs an upload or grant keeps wait until their grace
-- ends (sweeper).
UPDATE blob_claim_reviews r SET not_before = u.not_before
FROM (SELECT unnest(@blob_hashes::bytea[]) AS blob_hash, unnest(@fs_roots::boolean[]) AS fs_root,
             unnest(@not_befores::timestamptz[]) AS not_before) u
WHERE r.tenant_id = @tenant_id AND r.blob_hash = u.blob_hash AND r.fs_root = u.fs_root;

-- name: BlobClaimsNeeded :many
-- When the tenant last uploaded or was granted each of the hashes (the
-- epoch: never), for the grace that keeps its claim (sweeper).
SELECT h.blob_hash::bytea AS blob_hash,
       coalesce(greatest(p.put_at, g.created_at), 'epoch')::timestamptz AS last_claimed
FROM (SELECT DISTINCT unnest(@blob_hashes::bytea[]) AS blob_hash) h
LEFT JOIN blob_puts p ON p.tenant_id = @tenant_id AND p.blob_hash = h.blob_hash
LEFT JOIN tenant_blobs g ON g.tenant_id = @tenant_id AND g.blob_hash = h.blob_hash;

-- name: TenantPayloadsAmong :many
-- Which of the hashes are the payload of a turn of the tenant (sweeper;
-- a dead turn's row not yet buried counts too). There is no index by
-- payload hash (it would cost every append): one scan of the tenant's
-- turns, hashed against the set, however many hashes it is asked about.
SELECT DISTINCT t.payload_hash::bytea AS payload_hash FROM turns t
WHERE t.tenant_id = @tenant_id AND t.payload_hash IN (SELECT unnest(@blob_hashes::bytea[]));

-- name: TenantFSRoots :many
-- The fs roots of the tenant's turns (sweeper): what they reach is still
-- needed. The partial index turns_tenant_fs_root finds them.
SELECT DISTINCT fs_root_hash::bytea AS fs_root_hash FROM turns
WHERE tenant_id = @tenant_id AND fs_root_hash IS NOT NULL;

-- name: ReleaseBlobClaims :exec
-- Releases claims of the tenant (sweeper): the first writer's of
-- @released (a row of released_blob_claims), the grants of @ungranted,
-- and takes the reviewed blobs off the queue.
WITH released AS (
    INSERT INTO released_blob_claims (tenant_id, blob_hash)
    SELECT @tenant_id::text, unnest(@released::bytea[])
    ON CONFLICT DO NOTHING
), ungranted AS (
    DELETE FROM tenant_blobs g
    WHERE g.tenant_id = @tenant_id AND g.blob_hash = ANY(@ungranted::bytea[])
)
DELETE FROM blob_claim_reviews r
USING (SELECT unnest(@reviewed_hashes::bytea[]) AS blob_hash, unnest(@reviewed_fs_roots::boolean[]) AS fs_root) u
WHERE r.tenant_id = @tenant_id AND r.blob_hash = u.blob_hash AND r.fs_root = u.fs_root;

-- name: ListReleasedBlobClaims :many
-- Every released first writer's claim (recovery: reads and usage treat
-- them as not the tenant's).
SELECT tn.tenant_no, r.blob_hash
FROM released_blob_claims r JOIN tenants tn USING (tenant_id);

-- name: RecordBlobPut :exec
-- The tenant uploaded the blob at @put_at (PUT_BLOB): its claim is kept
-- for the grace period from then.
INSERT INTO blob_puts (tenant_id, blob_hash, put_at) VALUES (@tenant_id, @blob_hash, @put_at)
ON CONFLICT (tenant_id, blob_hash) DO UPDATE SET put_at = greatest(blob_puts.put_at, excluded.put_at);

-- name: PruneBlobPuts :exec
-- Forgets the uploads older than the grace period (sweeper).
DELETE FROM blob_puts WHERE put_at <= @before;

-- name: UnclaimedBlobs :many
-- Which of the hashes no tenant claims any more: their first writer
-- (@first_writers, the tenant ids the blob pack's records name, parallel
-- to @blob_hashes) is a deleted tenant or released its claim, and no
-- tenant holds a grant to them. A blob pack compaction may drop them.
SELECT u.blob_hash::bytea AS blob_hash
FROM (SELECT unnest(@blob_hashes::bytea[]) AS blob_hash, unnest(@first_writers::text[]) AS first_writer) u
WHERE (EXISTS (SELECT 1 FROM tenants t WHERE t.tenant_id = u.first_writer AND t.deleted_at IS NOT NULL)
       OR EXISTS (SELECT 1 FROM released_blob_claims r WHERE r.tenant_id = u.first_writer AND r.blob_hash = u.blob_hash))
  AND NOT EXISTS (SELECT 1 FROM tenant_blobs g WHERE g.blob_hash = u.blob_hash);

-- name: DropReleasedBlobClaims :exec
-- Forgets the released claims to blobs a compaction dropped from the
-- blob pack (sweeper, in the step that drops them): bytes stored again
-- later are a new record, their writer's again.
DELETE FROM released_blob_claims WHERE blob_hash = ANY(@blob_hashes::bytea[]);
