-- A counter of changes to each tenant's cards, so that the card reads can
-- trust their cache without asking Postgres about every card
-- (cardbox/reads.go, docs/cardbox.md).
--
-- Cards are immutable: a card stops being live only by an UPDATE (the soft
-- delete sets deleted_at; an operator may also move expires_at) or a
-- DELETE (the sweeper's purge, a tenant's deletion). Statement triggers
-- add one to tenants.card_changes for every tenant such a statement
-- touched, in the same transaction. A reader that finds the counter where
-- it was when it last saw a cached card live knows that no card of the
-- tenant has changed since, whoever changed it: this server, another
-- process or plain SQL. Inserts do not count: a new card is not cached
-- until a read has seen it in Postgres.
--
-- The counter lives in the tenant's row, which outlives the tenant as its
-- tombstone (00014), so it never goes back to a value a reader has seen.
-- Updating it locks that row until commit: card deletes of one tenant
-- queue behind each other, and one racing the tenant's deletion (which
-- locks the row first, then deletes the cards) can deadlock with it;
-- Postgres then fails one of the two, which the caller sees as
-- unavailable (503) and retries.

-- +goose Up
ALTER TABLE tenants ADD COLUMN card_changes bigint NOT NULL DEFAULT 0;

-- Runs as its owner (tenants' rows are not the request role's to update).
-- It fails rather than count nothing when it cannot see a tenant's row:
-- a missed change would let readers serve a deleted card.
-- +goose StatementBegin
CREATE FUNCTION count_card_changes() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    touched bigint;
    counted bigint;
BEGIN
    SELECT count(DISTINCT o.tenant_id) INTO touched FROM old_rows o;
    UPDATE tenants t SET card_changes = t.card_changes + 1
    WHERE t.tenant_id IN (SELECT o.tenant_id FROM old_rows o);
    GET DIAGNOSTICS counted = ROW_COUNT;
    IF counted <> touched THEN
        RAISE EXCEPTION 'count_card_changes: % of % tenants counted', counted, touched;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION count_card_changes() FROM PUBLIC;

CREATE TRIGGER cards_changes_update AFTER UPDATE ON cards
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_card_changes();
CREATE TRIGGER cards_changes_delete AFTER DELETE ON cards
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_card_changes();

-- +goose Down
DROP TRIGGER cards_changes_delete ON cards;
DROP TRIGGER cards_changes_update ON cards;
DROP FUNCTION count_card_changes();
ALTER TABLE tenants DROP COLUMN card_changes;
