-- Context assembly (migration 00035): a box's entries (zones and
-- positions), its snapshots, the facts assembly needs of its cards, and
-- cards by content hash.

-- name: LockBoxEntries :one
-- Locks a live box for an edit of its entries: the tenant's row first
-- (00024_lock_tenants_first), then the box's. Concurrent edits of one box
-- queue here, and each starts from the one before it.
WITH locked AS MATERIALIZED (SELECT lock_box_changes(ARRAY[@tenant_id::text]) AS ok)
SELECT b.card_ids, b.entry_ids, b.zones, b.positions, b.drafts, b.entry_seq,
       (b.entry_ids IS NOT NULL)::boolean AS structured
FROM boxes b, locked
WHERE b.tenant_id = @tenant_id::text AND b.box_id = @box_id::text AND b.deleted_at IS NULL AND locked.ok
FOR UPDATE OF b;

-- name: GetBoxEntries :one
SELECT b.card_ids, b.entry_ids, b.zones, b.positions, b.drafts, b.entry_seq,
       (b.entry_ids IS NOT NULL)::boolean AS structured, b.parent_ids, b.metadata, b.updated_at
FROM boxes b
WHERE b.tenant_id = @tenant_id::text AND b.box_id = @box_id::text AND b.deleted_at IS NULL;

-- name: SaveBoxEntries :one
-- Writes a box's entries, card_ids in the same order; the caller holds
-- the box's row lock (LockBoxEntries).
UPDATE boxes
SET card_ids = @card_ids::text[], entry_ids = @entry_ids::text[], zones = @zones::smallint[],
    positions = @positions::text[], drafts = @drafts::boolean[], entry_seq = @entry_seq::bigint,
    updated_at = @now::timestamptz
WHERE tenant_id = @tenant_id::text AND box_id = @box_id::text
RETURNING updated_at;

-- name: CardTypes :many
-- The type of each card named, whatever its state: the default zone of a
-- box entry.
SELECT c.card_id, coalesce(c.metadata->>'type', '')::text AS type
FROM unnest(@card_ids::text[]) AS u(id)
CROSS JOIN LATERAL (
    SELECT card_id, metadata FROM cards
    WHERE cards.tenant_id = @tenant_id::text AND cards.card_id = u.id
    LIMIT 1
) c;

-- name: AssemblyBox :one
-- A box's entries for an assembly, with its version (00049) and the
-- project's card change counter (as CardChanges; -1 when the project has
-- no live row): the stamp that tells which cached card facts are still
-- current.
SELECT b.card_ids, b.entry_ids, b.zones, b.positions, b.drafts, b.entry_seq,
       (b.entry_ids IS NOT NULL)::boolean AS structured, b.version,
       coalesce((SELECT t.card_changes FROM tenants t
                 WHERE t.tenant_id = @tenant_id::text AND t.deleted_at IS NULL), -1)::bigint AS card_changes
FROM boxes b
WHERE b.tenant_id = @tenant_id::text AND b.box_id = @box_id::text AND b.deleted_at IS NULL;

-- name: AssemblyBoxVersion :one
-- A box's version and the project's card change counter, as AssemblyBox
-- reads them, without the entries: all an assembly asks when it holds
-- what it made of the box's entries at that version.
SELECT b.version,
       coalesce((SELECT t.card_changes FROM tenants t
                 WHERE t.tenant_id = @tenant_id::text AND t.deleted_at IS NULL), -1)::bigint AS card_changes
FROM boxes b
WHERE b.tenant_id = @tenant_id::text AND b.box_id = @box_id::text AND b.deleted_at IS NULL;

-- name: AssemblyCards :many
-- What assembly needs of each card named (each looked up by the primary
-- key, as in GetLiveCards): whether it is live, its type and role, the
-- tool calls it makes or answers, its token count under each of
-- @tokenizers (-1 when not stored), and its version (created_at) and
-- expiry (Unix microseconds, 0 for none) to cache these facts with.
SELECT u.id::text AS card_id,
       (c.card_id IS NOT NULL)::boolean AS found,
       coalesce(c.deleted_at IS NOT NULL, false)::boolean AS deleted,
       coalesce(c.expires_at <= @now::timestamptz, false)::boolean AS expired,
       coalesce(c.metadata->>'type', '')::text AS type,
       coalesce(c.metadata->>'role', '')::text AS role,
       coalesce(c.tool_call_id, '')::text AS tool_call_id,
       coalesce(ARRAY(SELECT x->>'id' FROM jsonb_array_elements(
                    CASE WHEN jsonb_typeof(c.tool_calls) = 'array' THEN c.tool_calls ELSE '[]'::jsonb END) x
                WHERE x->>'id' IS NOT NULL), '{}')::text[] AS tool_call_ids,
       ARRAY(SELECT coalesce((c.token_counts ->> t.name)::integer, -1)
             FROM unnest(@tokenizers::text[]) WITH ORDINALITY AS t(name, n) ORDER BY t.n)::integer[] AS tokens,
       coalesce(c.created_at, 'epoch')::timestamptz AS version,
       coalesce((extract(epoch FROM c.expires_at) * 1000000)::bigint, 0)::bigint AS expires
FROM unnest(@card_ids::text[]) AS u(id)
LEFT JOIN LATERAL (
    SELECT * FROM cards
    WHERE cards.tenant_id = @tenant_id::text AND cards.card_id = u.id
    LIMIT 1
) c ON true;

-- name: CardIDsByContentHash :many
-- The live cards of the project with this content hash, oldest first.
SELECT card_id
FROM cards
WHERE tenant_id = @tenant_id::text AND content_hash = @content_hash::bytea
  AND deleted_at IS NULL AND (expires_at IS NULL OR expires_at > @now::timestamptz)
ORDER BY created_at, card_id
LIMIT @max_cards::integer;

-- name: DerivedCards :many
-- The cards among @card_ids that exist (whatever their state) and the
-- CXDB turn each was derived from (0: none).
SELECT card_id, coalesce(cxdb_turn_id, 0)::bigint AS cxdb_turn_id,
       (deleted_at IS NULL AND (expires_at IS NULL OR expires_at > @now::timestamptz))::boolean AS live
FROM cards
WHERE tenant_id = @tenant_id::text AND card_id = ANY (@card_ids::text[]);

-- name: InsertSnapshot :one
INSERT INTO box_snapshots (tenant_id, box_id, snapshot_id, entry_ids, card_ids, zones, positions,
                           drafts, metadata, created_at)
VALUES (@tenant_id::text, @box_id::text, @snapshot_id::text, @entry_ids::text[], @card_ids::text[],
        @zones::smallint[], @positions::text[], @drafts::boolean[], @metadata::jsonb, @now::timestamptz)
RETURNING created_at;

-- name: ListSnapshots :many
SELECT snapshot_id, cardinality(entry_ids)::integer AS length, metadata, created_at
FROM box_snapshots
WHERE tenant_id = @tenant_id::text AND box_id = @box_id::text
ORDER BY created_at, snapshot_id;

-- name: GetSnapshot :one
SELECT snapshot_id, entry_ids, card_ids, zones, positions, drafts, metadata, created_at
FROM box_snapshots
WHERE tenant_id = @tenant_id::text AND box_id = @box_id::text AND snapshot_id = @snapshot_id::text;
