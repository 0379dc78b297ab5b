-- name: GetTurnLogState :one
-- The store and its latest commit (0 and 1 before the first); pack_end is
-- -1 when unknown: before the first commit, or recorded before the column.
SELECT s.store_id,
       coalesce(c.committed_end, 0)::bigint AS committed_end,
       coalesce(c.next_turn_id, 1)::bigint AS next_turn_id,
       coalesce(c.pack_end, -1)::bigint AS pack_end
FROM turn_stores s
LEFT JOIN LATERAL (
    SELECT committed_end, next_turn_id, pack_end FROM turn_log_commits
    WHERE store_id = s.store_id ORDER BY committed_end DESC LIMIT 1
) c ON true
LIMIT 1;

-- name: InitTurnLogState :exec
INSERT INTO turn_stores (store_id) VALUES (@store_id);

-- name: ListContexts :many
SELECT t.tenant_no, c.context_id, c.base_turn_id, c.head_turn_id, c.head_depth, c.created_at, c.updated_at
FROM contexts c JOIN tenants t USING (tenant_id)
WHERE t.deleted_at IS NULL AND c.deleted_at IS NULL;

-- name: ListTurnTypes :many
SELECT t.tenant_no, tt.type_ref, tt.type_id
FROM turn_types tt JOIN tenants t USING (tenant_id)
WHERE t.deleted_at IS NULL;

-- The newest idempotency keys used after since, newest first, at most
-- max_keys of them: what recovery loads into memory (the rest stay in
-- Postgres, as GetIdempotencyKey finds them). Recovery reads the rows as
-- they arrive (ForEachNewestIdempotencyKey, store/internal/storedb/stream.go).
-- name: ListNewestIdempotencyKeys :many
SELECT t.tenant_no, k.context_id, k.idempotency_key, k.turn_id, k.created_at, k.requested_parent_turn_id
FROM idempotency_keys k JOIN tenants t USING (tenant_id)
WHERE k.created_at > @since AND t.deleted_at IS NULL
ORDER BY k.created_at DESC
LIMIT @max_keys;

-- name: ListOlderIdempotencyKeys :many
-- The keys of the window used from @since up to @until, oldest first:
-- those older than the newest a start-up holds in memory, for its filter
-- of forgotten keys (store.Engine.loadIdempotencyKeys). Read row by row
-- (ForEachOlderIdempotencyKey).
SELECT t.tenant_no, k.context_id, k.idempotency_key, k.created_at
FROM idempotency_keys k JOIN tenants t USING (tenant_id)
WHERE k.created_at > @since AND k.created_at <= @until AND t.deleted_at IS NULL
ORDER BY k.created_at;

-- name: ListIdempotencyKeys :many
-- The rows of the window of many keys of one tenant, newest first: the
-- lookups of the appends waiting together (store/idemlookup.go). A key
-- reused after its window has a row beside its expired one until the purge
-- deletes that (migration 00053); the window holds at most one.
SELECT k.context_id, k.idempotency_key, k.turn_id, k.created_at, k.requested_parent_turn_id
FROM (SELECT unnest(@context_ids::bigint[]) AS context_id, unnest(@idempotency_keys::bytea[]) AS idempotency_key) w
JOIN idempotency_keys k ON k.context_id = w.context_id AND k.idempotency_key = w.idempotency_key
WHERE k.tenant_id = @tenant_id AND k.created_at > @since
ORDER BY k.created_at DESC;

-- name: DeleteIdempotencyKeysBefore :execrows
DELETE FROM idempotency_keys WHERE created_at <= @before;

-- name: CreateContext :one
INSERT INTO contexts (tenant_id, context_id, head_turn_id, head_depth, base_turn_id, client_tag)
VALUES (@tenant_id, nextval('context_id_seq'), @base_turn_id, @head_depth, @base_turn_id, @client_tag)
RETURNING context_id, created_at;

-- name: TurnExists :one
SELECT EXISTS (SELECT 1 FROM turns WHERE tenant_id = @tenant_id AND turn_id = @turn_id);

-- name: TenantOwnsBlob :one
SELECT EXISTS (SELECT 1 FROM tenant_blobs WHERE tenant_id = @tenant_id AND blob_hash = @blob_hash);

-- name: TenantBlobsAmong :many
-- Which of the hashes the tenant was granted (stored after another tenant).
SELECT blob_hash FROM tenant_blobs WHERE tenant_id = @tenant_id AND blob_hash = ANY(@blob_hashes::bytea[]);

-- name: GrantBlob :one
-- Records that a tenant stored bytes another tenant stored first; reports
-- whether the grant is new.
WITH ins AS (
    INSERT INTO tenant_blobs (tenant_id, blob_hash) VALUES (@tenant_id, @blob_hash)
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM ins);

-- name: AttachFS :exec
WITH att AS (
    INSERT INTO fs_attachments (tenant_id, turn_id, fs_root_hash) VALUES (@tenant_id, @turn_id, @fs_root_hash)
    ON CONFLICT (tenant_id, turn_id) DO UPDATE SET fs_root_hash = excluded.fs_root_hash, attached_at = now()
)
UPDATE turns t SET fs_root_hash = @fs_root_hash WHERE t.tenant_id = @tenant_id AND t.turn_id = @turn_id;

-- name: CommitAppendBatch :exec
-- One statement writes a whole group of appends: the turn rows, the new
-- heads, idempotency keys, type refs, blob grants, fs attachments and the
-- turn log checkpoint with the blob pack's end after the group (laid out,
-- though not yet written, when the statement is sent: blobpack.Stage;
-- insert-only, so that groups in flight together do not contend on it). It runs inside the group's transaction, sent in one
-- round trip with BEGIN; COMMIT follows once the group's files are durable.
-- Foreign keys are checked at the end of the statement.
WITH new_types AS (
    INSERT INTO turn_types (tenant_id, type_ref, type_id)
    SELECT unnest(@type_tenant_ids::text[]),
           unnest(@type_refs::integer[]),
           unnest(@type_ids::text[])
),
new_turns AS (
    INSERT INTO turns (tenant_id, turn_id, context_id, parent_turn_id, depth, type_id, type_version,
                       encoding, compression, uncompressed_len, payload_hash, fs_root_hash,
                       idempotency_key, created_at)
    SELECT unnest(@tenant_ids::text[]),
           unnest(@turn_ids::bigint[]),
           unnest(@context_ids::bigint[]),
           unnest(@parent_turn_ids::bigint[]),
           unnest(@depths::bigint[]),
           unnest(@turn_type_ids::text[]),
           unnest(@type_versions::bigint[]),
           unnest(@encodings::bigint[]),
           unnest(@compressions::bigint[]),
           unnest(@uncompressed_lens::bigint[]),
           unnest(@payload_hashes::bytea[]),
           unnest(@fs_root_hashes::bytea[]),
           unnest(@idempotency_keys::bytea[]),
           unnest(@created_ats::timestamptz[])
),
new_heads AS (
    UPDATE contexts c
    SET head_turn_id = h.head_turn_id, head_depth = h.head_depth, updated_at = now()
    FROM (SELECT unnest(@head_tenant_ids::text[]) AS tenant_id, unnest(@head_context_ids::bigint[]) AS context_id,
                 unnest(@head_turn_ids::bigint[]) AS head_turn_id, unnest(@head_depths::bigint[]) AS head_depth) AS h
    WHERE c.tenant_id = h.tenant_id AND c.context_id = h.context_id
),
new_keys AS (
    INSERT INTO idempotency_keys (tenant_id, context_id, idempotency_key, turn_id, created_at, requested_parent_turn_id)
    SELECT unnest(@key_tenant_ids::text[]),
           unnest(@key_context_ids::bigint[]),
           unnest(@key_values::bytea[]),
           unnest(@key_turn_ids::bigint[]),
           unnest(@key_created_ats::timestamptz[]),
           unnest(@key_requested_parents::bigint[])
    -- a plain insert: the planner wrote no key still live, and a key reused
    -- after its window adds a row beside its expired one (migration 00053)
),
new_grants AS (
    INSERT INTO tenant_blobs (tenant_id, blob_hash)
    SELECT unnest(@grant_tenant_ids::text[]),
           unnest(@grant_hashes::bytea[])
    ON CONFLICT DO NOTHING
),
pruned AS (
    -- old commit rows; @prune_below is 0 (nothing) for most groups
    DELETE FROM turn_log_commits old WHERE old.store_id = @store_id AND old.committed_end < @prune_below
),
new_attachments AS (
    INSERT INTO fs_attachments (tenant_id, turn_id, fs_root_hash)
    SELECT unnest(@fs_tenant_ids::text[]),
           unnest(@fs_turn_ids::bigint[]),
           unnest(@fs_hashes::bytea[])
)
INSERT INTO turn_log_commits (store_id, committed_end, next_turn_id, pack_end)
VALUES (@store_id, @committed_end, @next_turn_id, @pack_end::bigint);

-- name: CommitPlainAppends :exec
-- CommitAppendBatch for the common group: no new types, idempotency keys,
-- fs attachments or commit rows to prune. Postgres sets up and runs each
-- CTE of a statement whether or not its arrays are empty, which for a
-- group of one turn is most of the statement's time.
WITH new_turns AS (
    INSERT INTO turns (tenant_id, turn_id, context_id, parent_turn_id, depth, type_id, type_version,
                       encoding, compression, uncompressed_len, payload_hash, created_at)
    SELECT unnest(@tenant_ids::text[]),
           unnest(@turn_ids::bigint[]),
           unnest(@context_ids::bigint[]),
           unnest(@parent_turn_ids::bigint[]),
           unnest(@depths::bigint[]),
           unnest(@turn_type_ids::text[]),
           unnest(@type_versions::bigint[]),
           unnest(@encodings::bigint[]),
           unnest(@compressions::bigint[]),
           unnest(@uncompressed_lens::bigint[]),
           unnest(@payload_hashes::bytea[]),
           unnest(@created_ats::timestamptz[])
),
new_heads AS (
    UPDATE contexts c
    SET head_turn_id = h.head_turn_id, head_depth = h.head_depth, updated_at = now()
    FROM (SELECT unnest(@head_tenant_ids::text[]) AS tenant_id, unnest(@head_context_ids::bigint[]) AS context_id,
                 unnest(@head_turn_ids::bigint[]) AS head_turn_id, unnest(@head_depths::bigint[]) AS head_depth) AS h
    WHERE c.tenant_id = h.tenant_id AND c.context_id = h.context_id
),
new_grants AS (
    INSERT INTO tenant_blobs (tenant_id, blob_hash)
    SELECT unnest(@grant_tenant_ids::text[]),
           unnest(@grant_hashes::bytea[])
    ON CONFLICT DO NOTHING
)
INSERT INTO turn_log_commits (store_id, committed_end, next_turn_id, pack_end)
VALUES (@store_id, @committed_end, @next_turn_id, @pack_end::bigint);

-- name: CommitKeyedAppends :exec
-- CommitPlainAppends with idempotency keys: the group of appends that
-- carry keys (every SDK append does) and need nothing else of
-- CommitAppendBatch, whose other CTEs Postgres would set up for nothing.
WITH new_turns AS (
    INSERT INTO turns (tenant_id, turn_id, context_id, parent_turn_id, depth, type_id, type_version,
                       encoding, compression, uncompressed_len, payload_hash, idempotency_key, created_at)
    SELECT unnest(@tenant_ids::text[]),
           unnest(@turn_ids::bigint[]),
           unnest(@context_ids::bigint[]),
           unnest(@parent_turn_ids::bigint[]),
           unnest(@depths::bigint[]),
           unnest(@turn_type_ids::text[]),
           unnest(@type_versions::bigint[]),
           unnest(@encodings::bigint[]),
           unnest(@compressions::bigint[]),
           unnest(@uncompressed_lens::bigint[]),
           unnest(@payload_hashes::bytea[]),
           unnest(@idempotency_keys::bytea[]),
           unnest(@created_ats::timestamptz[])
),
new_heads AS (
    UPDATE contexts c
    SET head_turn_id = h.head_turn_id, head_depth = h.head_depth, updated_at = now()
    FROM (SELECT unnest(@head_tenant_ids::text[]) AS tenant_id, unnest(@head_context_ids::bigint[]) AS context_id,
                 unnest(@head_turn_ids::bigint[]) AS head_turn_id, unnest(@head_depths::bigint[]) AS head_depth) AS h
    WHERE c.tenant_id = h.tenant_id AND c.context_id = h.context_id
),
new_keys AS (
    INSERT INTO idempotency_keys (tenant_id, context_id, idempotency_key, turn_id, created_at, requested_parent_turn_id)
    SELECT unnest(@key_tenant_ids::text[]),
           unnest(@key_context_ids::bigint[]),
           unnest(@key_values::bytea[]),
           unnest(@key_turn_ids::bigint[]),
           unnest(@key_created_ats::timestamptz[]),
           unnest(@key_requested_parents::bigint[])
),
new_grants AS (
    INSERT INTO tenant_blobs (tenant_id, blob_hash)
    SELECT unnest(@grant_tenant_ids::text[]),
           unnest(@grant_hashes::bytea[])
    ON CONFLICT DO NOTHING
)
INSERT INTO turn_log_commits (store_id, committed_end, next_turn_id, pack_end)
VALUES (@store_id, @committed_end, @next_turn_id, @pack_end::bigint);

-- name: TurnStoreRelationBytes :one
-- Bytes Postgres uses for the turn store's tables and their indexes.
SELECT (pg_total_relation_size('turns') + pg_total_relation_size('contexts')
        + pg_total_relation_size('idempotency_keys') + pg_total_relation_size('fs_attachments'))::bigint;

-- name: EndEarlierSessions :one
-- Ends the sessions another cardboxd process left on this database (see
-- end_earlier_sessions in the migrations) and returns how many did not end.
SELECT end_earlier_sessions(@prefix::text)::integer AS still_running;

-- name: SetPackEnd :exec
-- Records the blob pack's end on a commit row that has none: the end a
-- start validated, for a store whose commit rows predate pack_end. A
-- group's statement records its own (CommitAppendBatch).
UPDATE turn_log_commits SET pack_end = @pack_end::bigint
WHERE store_id = @store_id AND committed_end = @committed_end AND pack_end IS NULL;

-- name: RecordPackHole :exec
INSERT INTO pack_holes (store_id, start_offset, end_offset, blob_hash, reason)
VALUES (@store_id, @start_offset, @end_offset, @blob_hash, @reason)
ON CONFLICT (store_id, start_offset) DO NOTHING;

-- name: ListPackHoles :many
-- The damaged records of the blob pack recorded with their blob: at start
-- the store reads again those its index still lists (found when read by
-- an earlier process: Open verifies only the last MiB's records).
SELECT start_offset, end_offset, blob_hash FROM pack_holes
WHERE store_id = @store_id AND blob_hash IS NOT NULL
ORDER BY start_offset;

-- name: ListFSRoots :many
SELECT DISTINCT fs_root_hash FROM fs_attachments;

-- name: ListTurnRecordsAfter :many
-- The turns as the turn log records them, in id order, a page at a time
-- (cardbox verify and recover); a deleted tenant has none.
SELECT t.turn_id, t.parent_turn_id, t.context_id, t.depth, tn.tenant_no, tt.type_ref,
       t.type_version, t.encoding, t.compression, t.uncompressed_len,
       (t.fs_root_hash IS NOT NULL)::boolean AS has_fs_root, t.created_at, t.payload_hash
FROM turns t
JOIN tenants tn ON tn.tenant_id = t.tenant_id
JOIN turn_types tt ON tt.tenant_id = t.tenant_id AND tt.type_id = t.type_id
WHERE t.turn_id > @after AND tn.deleted_at IS NULL
ORDER BY t.turn_id
LIMIT @page_size;

-- name: ResetTurnLogCommits :exec
-- After cardbox recover rewrote the turn log: one commit row saying where
-- it ends.
WITH gone AS (
    DELETE FROM turn_log_commits WHERE store_id = @store_id AND committed_end <> @committed_end
)
INSERT INTO turn_log_commits (store_id, committed_end, next_turn_id, pack_end)
VALUES (@store_id, @committed_end, @next_turn_id, @pack_end)
ON CONFLICT (store_id, committed_end)
DO UPDATE SET next_turn_id = excluded.next_turn_id, pack_end = excluded.pack_end;
