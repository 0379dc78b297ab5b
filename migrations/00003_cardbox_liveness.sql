-- CardBox: an index for the liveness check of cached card reads.
--
-- A card's rendering never changes while it lives, so the server caches it;
-- every read still asks Postgres which of the requested cards are live (not
-- deleted, not expired) and at which version (created_at). This index holds
-- all the columns that check reads, so Postgres answers it with an
-- index-only scan, without visiting the table's heap pages once they are
-- all-visible (vacuumed).

-- +goose Up
CREATE INDEX cards_liveness ON cards (tenant_id, card_id) INCLUDE (created_at, deleted_at, expires_at);

-- +goose Down
DROP INDEX cards_liveness;
