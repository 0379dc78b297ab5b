-- Hosted mode: per-tenant storage quotas (docs/security.md, "Storage
-- quotas").
--
-- A tenant's usage has two parts, each counted where its bytes are:
--
--   - the turn store's (blobs, turns, contexts, registry bundles) is
--     derived by the store from its files and committed rows at every
--     start and kept in memory as writes commit (store/usage.go): a blob's
--     first owner is recorded only in the blob pack, so no Postgres
--     counter could be updated atomically with it;
--   - CardBox's (cards and boxes) lives in Postgres alone, so it is
--     counted here by statement triggers, in the same transaction as every
--     insert, update and delete of a card or box: it cannot drift, whoever
--     writes the rows. The triggers only insert into cardbox_usage_log, so
--     that concurrent writes of one tenant never wait on one counter row
--     (its lock would be held until each commit); the sweeper folds the
--     log into tenant_usage (compact_cardbox_usage). A tenant's bytes are
--     tenant_usage.cardbox_bytes plus its rows of the log.

-- +goose Up
-- The tenant's quota in bytes; NULL takes the server's default
-- (--tenant-quota-bytes). Set with `cardbox tenant quota`.
ALTER TABLE tenants ADD COLUMN quota_bytes bigint CHECK (quota_bytes > 0);

CREATE TABLE tenant_usage (
    tenant_id     text PRIMARY KEY REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    -- bytes of the tenant's cards and boxes, deleted ones included until
    -- the sweeper purges them (see card_bytes and box_bytes), up to the
    -- last compaction of cardbox_usage_log
    cardbox_bytes bigint NOT NULL DEFAULT 0
);

-- Changes to the bytes of tenants' cards and boxes since the last
-- compaction: insert-only, one row per tenant per statement.
CREATE TABLE cardbox_usage_log (
    tenant_id text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    bytes     bigint NOT NULL
);
CREATE INDEX cardbox_usage_log_tenant ON cardbox_usage_log (tenant_id);

-- What a card is charged: its id and the text of its JSON as Postgres
-- renders it (content, tool_calls, metadata) and its tool_call_id.
-- +goose StatementBegin
CREATE FUNCTION card_bytes(card_id text, content jsonb, tool_calls jsonb, tool_call_id text, metadata jsonb)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (octet_length(card_id) + coalesce(octet_length(content::text), 0)
            + coalesce(octet_length(tool_calls::text), 0) + coalesce(octet_length(tool_call_id), 0)
            + octet_length(metadata::text))::bigint
$$;
-- +goose StatementEnd

-- What a box is charged: its id, the bytes of its card ids and parent ids,
-- and the text of its metadata.
-- +goose StatementBegin
CREATE FUNCTION box_bytes(box_id text, card_ids text[], parent_ids text[], metadata jsonb)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (octet_length(box_id) + octet_length(array_to_string(card_ids, ''))
            + octet_length(array_to_string(parent_ids, '')) + octet_length(metadata::text))::bigint
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION add_cardbox_bytes(tenant text, delta bigint) RETURNS void
LANGUAGE sql VOLATILE AS $$
    INSERT INTO cardbox_usage_log (tenant_id, bytes) VALUES (tenant, delta)
$$;
-- +goose StatementEnd

-- Folds the committed rows of cardbox_usage_log into tenant_usage, in one
-- statement: a reader sees them in one place or the other, never both.
-- Rows committed meanwhile stay for the next compaction.
-- +goose StatementBegin
CREATE FUNCTION compact_cardbox_usage() RETURNS void
LANGUAGE sql VOLATILE AS $$
    WITH gone AS (
        DELETE FROM cardbox_usage_log RETURNING tenant_id, bytes
    )
    INSERT INTO tenant_usage AS u (tenant_id, cardbox_bytes)
    SELECT tenant_id, sum(bytes)::bigint FROM gone GROUP BY tenant_id
    ON CONFLICT (tenant_id) DO UPDATE SET cardbox_bytes = u.cardbox_bytes + excluded.cardbox_bytes
$$;
-- +goose StatementEnd

-- Cards are immutable: an UPDATE only sets deleted_at, which changes no
-- charged byte, so cards have no UPDATE trigger (it would render every
-- deleted card's JSON twice for nothing).
-- +goose StatementBegin
CREATE FUNCTION count_card_bytes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM add_cardbox_bytes(n.tenant_id, sum(card_bytes(n.card_id, n.content, n.tool_calls, n.tool_call_id, n.metadata))::bigint)
        FROM new_rows n GROUP BY n.tenant_id;
    ELSE
        PERFORM add_cardbox_bytes(o.tenant_id, -sum(card_bytes(o.card_id, o.content, o.tool_calls, o.tool_call_id, o.metadata))::bigint)
        FROM old_rows o GROUP BY o.tenant_id;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION count_box_bytes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM add_cardbox_bytes(n.tenant_id, sum(box_bytes(n.box_id, n.card_ids, n.parent_ids, n.metadata))::bigint)
        FROM new_rows n GROUP BY n.tenant_id;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM add_cardbox_bytes(o.tenant_id, -sum(box_bytes(o.box_id, o.card_ids, o.parent_ids, o.metadata))::bigint)
        FROM old_rows o GROUP BY o.tenant_id;
    ELSE
        PERFORM add_cardbox_bytes(d.tenant_id, sum(d.bytes)::bigint)
        FROM (SELECT n.tenant_id, box_bytes(n.box_id, n.card_ids, n.parent_ids, n.metadata) AS bytes FROM new_rows n
              UNION ALL
              SELECT o.tenant_id, -box_bytes(o.box_id, o.card_ids, o.parent_ids, o.metadata) FROM old_rows o) d
        GROUP BY d.tenant_id HAVING sum(d.bytes) <> 0;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- The triggers first: they lock the tables against writes until this
-- migration commits, so the count below misses none.
CREATE TRIGGER cards_usage_insert AFTER INSERT ON cards
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_card_bytes();
CREATE TRIGGER cards_usage_delete AFTER DELETE ON cards
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_card_bytes();
CREATE TRIGGER boxes_usage_insert AFTER INSERT ON boxes
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_box_bytes();
CREATE TRIGGER boxes_usage_update AFTER UPDATE ON boxes
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_box_bytes();
CREATE TRIGGER boxes_usage_delete AFTER DELETE ON boxes
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_box_bytes();

INSERT INTO tenant_usage (tenant_id, cardbox_bytes)
SELECT tenant_id, sum(bytes)::bigint FROM (
    SELECT tenant_id, card_bytes(card_id, content, tool_calls, tool_call_id, metadata) AS bytes FROM cards
    UNION ALL
    SELECT tenant_id, box_bytes(box_id, card_ids, parent_ids, metadata) FROM boxes
) c
GROUP BY tenant_id;

-- Row-level security and the path roles (migrations/00011): the usage
-- tables are a tenant's rows like any other. The trigger's logging and the
-- sweeper's compaction run as their functions' owner (SECURITY DEFINER):
-- a request's role writes no usage row itself.
ALTER FUNCTION add_cardbox_bytes(text, bigint) SECURITY DEFINER SET search_path = public, pg_temp;
ALTER FUNCTION compact_cardbox_usage() SECURITY DEFINER SET search_path = public, pg_temp;
REVOKE EXECUTE ON FUNCTION add_cardbox_bytes(text, bigint), compact_cardbox_usage() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION add_cardbox_bytes(text, bigint) TO cardbox_tenant, cardbox_sweeper, cardbox_admin;
GRANT EXECUTE ON FUNCTION compact_cardbox_usage() TO cardbox_sweeper;
GRANT SELECT ON tenant_usage, cardbox_usage_log TO cardbox_tenant, cardbox_lookup, cardbox_admin;
GRANT SELECT ON tenant_blobs, registry_bundles TO cardbox_recovery;
GRANT UPDATE (quota_bytes) ON tenants TO cardbox_admin;
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tenant_usage', 'cardbox_usage_log']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_rows ON %I TO cardbox_tenant
                         USING (tenant_id = current_setting('cardbox.tenant', true))
                         WITH CHECK (tenant_id = current_setting('cardbox.tenant', true))$p$, t);
        EXECUTE format($p$CREATE POLICY system_paths ON %I
                         TO cardbox_committer, cardbox_recovery, cardbox_sweeper, cardbox_lookup, cardbox_admin
                         USING (true) WITH CHECK (true)$p$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER boxes_usage_delete ON boxes;
DROP TRIGGER boxes_usage_update ON boxes;
DROP TRIGGER boxes_usage_insert ON boxes;
DROP TRIGGER cards_usage_delete ON cards;
DROP TRIGGER cards_usage_insert ON cards;
DROP FUNCTION count_box_bytes();
DROP FUNCTION count_card_bytes();
DROP FUNCTION compact_cardbox_usage();
DROP FUNCTION add_cardbox_bytes(text, bigint);
DROP FUNCTION box_bytes(text, text[], text[], jsonb);
DROP FUNCTION card_bytes(text, jsonb, jsonb, text, jsonb);
DROP TABLE cardbox_usage_log;
DROP TABLE tenant_usage;
ALTER TABLE tenants DROP COLUMN quota_bytes;
