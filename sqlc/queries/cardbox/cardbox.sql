-- name: InsertCards :many
-- A card is live when it is neither deleted nor expired at @now; reads
-- return live cards only. Batch reads take id arrays and answer in one
-- query per table; callers restore request order.
--
-- Inserts the cards that do not exist yet and returns them; ids that exist
-- (live, deleted or expired) are skipped and checked by the caller.
--
-- content_hash and token_counts are computed by the caller once per card
-- (00035); cxdb_context_id and cxdb_turn_id (0: none) link a card derived
-- from a CXDB turn to it.
INSERT INTO cards (tenant_id, card_id, content, tool_calls, tool_call_id, ttl_seconds,
                   expires_at, metadata, created_at, content_hash, token_counts,
                   cxdb_context_id, cxdb_turn_id)
SELECT @tenant_id::text AS tenant_id, n.card_id, n.content, n.tool_calls,
       NULLIF(n.tool_call_id, '') AS tool_call_id,
       NULLIF(n.ttl_seconds, 0) AS ttl_seconds,
       CASE WHEN n.ttl_seconds > 0
            THEN n.created_at + make_interval(0, 0, 0, 0, 0, 0, n.ttl_seconds) END AS expires_at,
       n.metadata, n.created_at, n.content_hash, n.token_counts,
       NULLIF(n.cxdb_context_id, 0), NULLIF(n.cxdb_turn_id, 0)
FROM (SELECT @now::timestamptz AS created_at,
             unnest(@card_ids::text[]) AS card_id,
             unnest(@contents::jsonb[]) AS content,
             unnest(@tool_calls::jsonb[]) AS tool_calls,
             unnest(@tool_call_ids::text[]) AS tool_call_id,
             unnest(@ttl_seconds::integer[]) AS ttl_seconds,
             unnest(@metadatas::jsonb[]) AS metadata,
             unnest(@content_hashes::bytea[]) AS content_hash,
             unnest(@token_counts::jsonb[]) AS token_counts,
             unnest(@cxdb_context_ids::bigint[]) AS cxdb_context_id,
             unnest(@cxdb_turn_ids::bigint[]) AS cxdb_turn_id) AS n
ON CONFLICT (tenant_id, card_id) DO NOTHING
RETURNING tenant_id, card_id, content, tool_calls, tool_call_id, ttl_seconds, expires_at,
          deleted_at, metadata, created_at, coalesce(metadata->>'type', '')::text AS type,
          coalesce(metadata->>'role', '')::text AS role,
          coalesce(metadata->>'author_id', '')::text AS author_id;

-- name: CompareCards :many
-- Returns the stored rows (whatever their state) for the given cards and
-- whether each has exactly the given fields, for idempotent replays.
SELECT c.tenant_id, c.card_id, c.content, c.tool_calls, c.tool_call_id, c.ttl_seconds,
       c.expires_at, c.deleted_at, c.metadata, c.created_at,
       coalesce(c.metadata->>'type', '')::text AS type,
       coalesce(c.metadata->>'role', '')::text AS role,
       coalesce(c.metadata->>'author_id', '')::text AS author_id,
       (c.content IS NOT DISTINCT FROM n.content
        AND c.tool_calls IS NOT DISTINCT FROM n.tool_calls
        AND c.tool_call_id IS NOT DISTINCT FROM NULLIF(n.tool_call_id, '')
        AND c.ttl_seconds IS NOT DISTINCT FROM NULLIF(n.ttl_seconds, 0)
        AND c.metadata = n.metadata)::boolean AS same
FROM cards c
JOIN (SELECT unnest(@card_ids::text[]) AS card_id,
             unnest(@contents::jsonb[]) AS content,
             unnest(@tool_calls::jsonb[]) AS tool_calls,
             unnest(@tool_call_ids::text[]) AS tool_call_id,
             unnest(@ttl_seconds::integer[]) AS ttl_seconds,
             unnest(@metadatas::jsonb[]) AS metadata) AS n
  ON c.card_id = n.card_id
WHERE c.tenant_id = @tenant_id::text;

-- name: GetLiveCards :many
-- Batch reads look each id up by the primary key, whatever the table's
-- statistics say: a LATERAL subquery with LIMIT cannot be flattened into a
-- join, so Postgres cannot choose to scan the whole project instead (as
-- it did for card_id = ANY (...) and for NOT EXISTS after a bulk load,
-- before ANALYZE; docs/performance.md). TestBatchReadPlansDoNotDependOnStatistics
-- checks the plans.
SELECT c.tenant_id, c.card_id, c.content, c.tool_calls, c.tool_call_id, c.ttl_seconds, c.expires_at,
       c.deleted_at, c.metadata, c.created_at, coalesce(c.metadata->>'type', '')::text AS type,
       coalesce(c.metadata->>'role', '')::text AS role,
       coalesce(c.metadata->>'author_id', '')::text AS author_id
FROM unnest(@card_ids::text[]) AS u(id)
CROSS JOIN LATERAL (
    SELECT * FROM cards
    WHERE cards.tenant_id = @tenant_id::text AND cards.card_id = u.id
      AND cards.deleted_at IS NULL AND (cards.expires_at IS NULL OR cards.expires_at > @now::timestamptz)
    LIMIT 1
) c;

-- name: LiveCardVersions :one
-- Finds the live cards among the given ids: the check that cached cards
-- are still live. It returns their positions in @card_ids (1-based),
-- their versions (created_at) and their expiry (Unix microseconds, 0 for
-- none: SQL may have moved it), as one row of arrays, which costs the
-- client far less to decode than a row per card.
--
-- The lateral join looks each id up by the primary key's columns (see
-- GetLiveCards), and it reads only columns of the cards_liveness index (an
-- index-only scan once the table is vacuumed).
SELECT coalesce(array_agg(u.n) FILTER (WHERE v.created_at IS NOT NULL), '{}')::integer[] AS positions,
       coalesce(array_agg(v.created_at) FILTER (WHERE v.created_at IS NOT NULL), '{}')::timestamptz[] AS versions,
       coalesce(array_agg(v.expires) FILTER (WHERE v.created_at IS NOT NULL), '{}')::bigint[] AS expiries
FROM unnest(@card_ids::text[]) WITH ORDINALITY AS u(id, n)
LEFT JOIN LATERAL (
    SELECT c.created_at, coalesce((extract(epoch FROM c.expires_at) * 1000000)::bigint, 0) AS expires FROM cards c
    WHERE c.tenant_id = @tenant_id::text AND c.card_id = u.id
      AND c.deleted_at IS NULL AND (c.expires_at IS NULL OR c.expires_at > @now::timestamptz)
    LIMIT 1
) v ON true;

-- name: CardChanges :one
-- The counter of changes to the project's cards (migration 00021); no row
-- when the project does not exist or was deleted. The card reads trust a
-- cached card while the counter is where it was when they last saw the
-- card live.
SELECT card_changes FROM tenants WHERE tenant_id = @tenant_id AND deleted_at IS NULL;

-- name: MissingCardIDs :many
-- Returns the given ids that do not name a live card of the tenant (each
-- looked up by the primary key, as in GetLiveCards).
SELECT u.id::text AS card_id
FROM unnest(@card_ids::text[]) AS u(id)
LEFT JOIN LATERAL (
    SELECT 1 AS found FROM cards c
    WHERE c.tenant_id = @tenant_id::text AND c.card_id = u.id
      AND c.deleted_at IS NULL AND (c.expires_at IS NULL OR c.expires_at > @now::timestamptz)
    LIMIT 1
) l ON true
WHERE l.found IS NULL;

-- name: SoftDeleteCard :execrows
-- Marks a card deleted; deleting a deleted card keeps the first deletion time.
-- The tenant's row is locked before the card's (00024_lock_tenants_first).
WITH locked AS MATERIALIZED (SELECT lock_card_changes(ARRAY[@tenant_id::text]) AS ok)
UPDATE cards c SET deleted_at = coalesce(c.deleted_at, @now::timestamptz)
FROM locked
WHERE c.tenant_id = @tenant_id::text AND c.card_id = @card_id::text AND locked.ok;

-- name: InsertBox :one
INSERT INTO boxes (tenant_id, box_id, card_ids, parent_ids, metadata, created_at, updated_at)
VALUES (@tenant_id::text, @box_id::text, @card_ids::text[], @parent_ids::text[], @metadata::jsonb,
        @now::timestamptz, @now::timestamptz)
RETURNING tenant_id, box_id, card_ids, parent_ids, metadata, created_at, updated_at, deleted_at;

-- name: UpsertBox :one
-- Creates or replaces a box. Replacing a deleted box brings it back as a new
-- box (new created_at). A replaced box is a plain list again: its entries
-- (zones and positions, 00035) go. The tenant's row is locked before the box's
-- (00024_lock_tenants_first).
WITH locked AS MATERIALIZED (SELECT lock_box_changes(ARRAY[@tenant_id::text]) AS ok)
INSERT INTO boxes AS b (tenant_id, box_id, card_ids, parent_ids, metadata, created_at, updated_at)
SELECT @tenant_id::text, @box_id::text, @card_ids::text[], @parent_ids::text[], @metadata::jsonb,
       @now::timestamptz, @now::timestamptz
FROM locked WHERE locked.ok
ON CONFLICT (tenant_id, box_id) DO UPDATE
SET card_ids = excluded.card_ids,
    entry_ids = NULL, zones = NULL, positions = NULL, drafts = NULL,
    parent_ids = excluded.parent_ids,
    metadata = excluded.metadata,
    updated_at = excluded.updated_at,
    created_at = CASE WHEN b.deleted_at IS NULL THEN b.created_at ELSE excluded.created_at END,
    deleted_at = NULL
RETURNING tenant_id, box_id, card_ids, parent_ids, metadata, created_at, updated_at, deleted_at;

-- name: AppendToBox :one
-- Appends under the row lock: concurrent appends to one box serialize and
-- none is lost. A box that would grow beyond @max_cards is left as it is
-- (no row). Answers the new length, not the ids, so that an append costs
-- the same answer whatever the box holds. The tenant's row is locked
-- before the box's (00024_lock_tenants_first).
WITH locked AS MATERIALIZED (SELECT lock_box_changes(ARRAY[@tenant_id::text]) AS ok)
-- A box with entries (zones and positions, 00035) is not appended to here
-- (no row): the caller places its new entries.
UPDATE boxes b
SET card_ids = b.card_ids || @card_ids::text[], updated_at = @now::timestamptz
FROM locked
WHERE b.tenant_id = @tenant_id::text AND b.box_id = @box_id::text AND b.deleted_at IS NULL
  AND b.entry_ids IS NULL
  AND cardinality(b.card_ids) + cardinality(@card_ids::text[]) <= @max_cards::int AND locked.ok
RETURNING cardinality(b.card_ids)::int AS length, b.updated_at;

-- name: LiveBoxLength :one
SELECT cardinality(card_ids)::int AS length
FROM boxes
WHERE tenant_id = @tenant_id::text AND box_id = @box_id::text AND deleted_at IS NULL;

-- name: GetLiveBox :one
SELECT tenant_id, box_id, card_ids, parent_ids, metadata, created_at, updated_at, deleted_at
FROM boxes
WHERE tenant_id = @tenant_id::text AND box_id = @box_id::text AND deleted_at IS NULL;

-- name: GetLiveBoxes :many
-- Each id looked up by the primary key, as in GetLiveCards.
SELECT b.tenant_id, b.box_id, b.card_ids, b.parent_ids, b.metadata, b.created_at, b.updated_at, b.deleted_at
FROM unnest(@box_ids::text[]) AS u(id)
CROSS JOIN LATERAL (
    SELECT * FROM boxes
    WHERE boxes.tenant_id = @tenant_id::text AND boxes.box_id = u.id AND boxes.deleted_at IS NULL
    LIMIT 1
) b;

-- name: GetBoxPage :one
-- Returns one page of a box's card ids: the @page_limit ids before position
-- @before (0-based, exclusive; negative means the end of the box), and the
-- position where the page starts.
-- structured says the box has entries (00035), whose pages are read by
-- place instead.
SELECT p.total::integer AS total,
       p.page_start::integer AS page_start,
       p.card_ids[p.page_start + 1 : p.page_end]::text[] AS card_ids,
       p.structured::boolean AS structured
FROM (SELECT b.card_ids, cardinality(b.card_ids) AS total, b.entry_ids IS NOT NULL AS structured,
             greatest(0, e.page_end - @page_limit::integer) AS page_start, e.page_end
      FROM boxes b,
           LATERAL (SELECT CASE WHEN @before::integer < 0 THEN cardinality(b.card_ids)
                                ELSE least(@before::integer, cardinality(b.card_ids)) END AS page_end) e
      WHERE b.tenant_id = @tenant_id::text AND b.box_id = @box_id::text AND b.deleted_at IS NULL) p;

-- name: SoftDeleteBox :execrows
-- The tenant's row is locked before the box's (00024_lock_tenants_first).
WITH locked AS MATERIALIZED (SELECT lock_box_changes(ARRAY[@tenant_id::text]) AS ok)
UPDATE boxes b SET deleted_at = coalesce(b.deleted_at, @now::timestamptz)
FROM locked
WHERE b.tenant_id = @tenant_id::text AND b.box_id = @box_id::text AND locked.ok;

-- name: PurgeCards :execrows
-- Removes up to @batch_size cards that expired before @expired_before or were
-- deleted before @deleted_before.
-- Their tenants' rows are locked first (00024_lock_tenants_first).
WITH d AS MATERIALIZED (
    (SELECT tenant_id, card_id FROM cards
     WHERE expires_at < @expired_before::timestamptz LIMIT @batch_size::integer)
    UNION
    (SELECT tenant_id, card_id FROM cards
     WHERE deleted_at < @deleted_before::timestamptz LIMIT @batch_size::integer)
),
locked AS MATERIALIZED (
    SELECT lock_card_changes(array_agg(DISTINCT d.tenant_id)) AS ok FROM d
)
DELETE FROM cards c
USING d, locked
WHERE c.tenant_id = d.tenant_id AND c.card_id = d.card_id AND locked.ok;

-- name: PurgeBoxes :execrows
-- Removes up to @batch_size boxes deleted before @deleted_before, their
-- tenants' rows locked first (00024_lock_tenants_first).
WITH d AS MATERIALIZED (
    SELECT tenant_id, box_id FROM boxes
    WHERE deleted_at < @deleted_before::timestamptz LIMIT @batch_size::integer
),
locked AS MATERIALIZED (
    SELECT lock_box_changes(array_agg(DISTINCT d.tenant_id)) AS ok FROM d
)
DELETE FROM boxes b
USING d, locked
WHERE b.tenant_id = d.tenant_id AND b.box_id = d.box_id AND locked.ok;

-- name: LiveCardSizes :one
-- Measures the live cards among the given ids before a read loads them,
-- so that the read can charge each to the answer budget first: their
-- positions in @card_ids (1-based) and, for each, at least the bytes of
-- its JSON as the API writes it, without its project id. content,
-- metadata (twice: type, role and author_id repeat its strings) and
-- tool_calls are measured as jsonb's text, which the API's JSON never
-- exceeds but for the characters it escapes (<, > and & become six bytes,
-- U+2028 and U+2029 six instead of three); the ids may be escaped whole.
-- Each id is looked up by the primary key (see GetLiveCards).
SELECT coalesce(array_agg(u.n ORDER BY u.n), '{}')::integer[] AS positions,
       coalesce(array_agg(m.size ORDER BY u.n), '{}')::bigint[] AS sizes
FROM unnest(@card_ids::text[]) WITH ORDINALITY AS u(id, n)
CROSS JOIN LATERAL (
    SELECT c.card_id, c.tool_call_id, c.content, c.metadata, c.tool_calls FROM cards c
    WHERE c.tenant_id = @tenant_id::text AND c.card_id = u.id
      AND c.deleted_at IS NULL AND (c.expires_at IS NULL OR c.expires_at > @now::timestamptz)
    LIMIT 1
) c
CROSS JOIN LATERAL (
    SELECT (512 + 6 * octet_length(c.card_id) + 6 * coalesce(octet_length(c.tool_call_id), 0)
            + coalesce(sum(octet_length(j.t)
                           + 5 * (length(j.t) - length(translate(j.t, '<>&', '')))
                           + 3 * (length(j.t) - length(translate(j.t, E'\u2028\u2029', '')))), 0))::bigint AS size
    FROM unnest(ARRAY[c.content::text, c.metadata::text, c.metadata::text, c.tool_calls::text]) AS j(t)
) m;

-- name: LiveBoxSizes :one
-- Measures the live boxes among the given ids before a read loads them:
-- their positions in @box_ids (1-based) and, for each, at least the bytes
-- of its JSON as the API writes it without hydrated cards and project id
-- (its card and parent ids, each quoted and escaped, and its metadata
-- measured as LiveCardSizes measures a card's). Each id is looked up by
-- the primary key (see GetLiveBoxes).
SELECT coalesce(array_agg(u.n ORDER BY u.n), '{}')::integer[] AS positions,
       coalesce(array_agg(m.size ORDER BY u.n), '{}')::bigint[] AS sizes
FROM unnest(@box_ids::text[]) WITH ORDINALITY AS u(id, n)
CROSS JOIN LATERAL (
    SELECT b.box_id, b.card_ids, b.parent_ids, b.metadata FROM boxes b
    WHERE b.tenant_id = @tenant_id::text AND b.box_id = u.id AND b.deleted_at IS NULL
    LIMIT 1
) b
CROSS JOIN LATERAL (
    SELECT (512 + 6 * octet_length(b.box_id)
            + 3 * (coalesce(cardinality(b.card_ids), 0) + coalesce(cardinality(b.parent_ids), 0))
            + coalesce(sum(octet_length(j.t)
                           + 5 * (length(j.t) - length(translate(j.t, '<>&', '')))
                           + 3 * (length(j.t) - length(translate(j.t, E'\u2028\u2029', '')))), 0))::bigint AS size
    FROM unnest(ARRAY[array_to_string(b.card_ids, ''), array_to_string(b.parent_ids, ''), b.metadata::text]) AS j(t)
) m;
