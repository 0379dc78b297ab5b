-- Writes that change a tenant's existing cards or boxes lock the tenant's
-- row before theirs, as a tenant's deletion does.
--
-- A tenant's deletion (internal/auth's DeleteTenant) locks the tenant's
-- row FOR UPDATE, then deletes its cards, boxes and usage rows. A card or box write
-- reached the tenant's row only after locking the rows it changed: the
-- card change counter's trigger (00021) updates it, and the usage log's
-- insert (00013) checks its foreign key to it (FOR KEY SHARE). A soft
-- delete, a box append or replace, or the sweeper's purge then held a
-- card's or box's row and waited for the tenant's, while the deletion
-- held the tenant's and waited for the card's or box's; Postgres broke
-- the cycle by failing one of them (40P01, a 503 to the client). With the
-- tenants locked first, in tenant_id order, the two queue instead: a write
-- that waited for a deletion then finds its rows gone.
--
-- Each function takes the lock the write would take later anyway, so it
-- adds no waiting between writes: FOR NO KEY UPDATE before the card
-- counter's UPDATE (card changes of one tenant already queued behind each
-- other on it), FOR KEY SHARE before a box change (box writers share it).
-- Neither conflicts with the key-share locks of inserts' foreign keys.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION lock_card_changes(tenant_ids text[]) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM 1 FROM tenants WHERE tenant_id = ANY (tenant_ids)
    ORDER BY tenant_id FOR NO KEY UPDATE;
    RETURN true;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION lock_box_changes(tenant_ids text[]) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM 1 FROM tenants WHERE tenant_id = ANY (tenant_ids)
    ORDER BY tenant_id FOR KEY SHARE;
    RETURN true;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION lock_card_changes(text[]), lock_box_changes(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lock_card_changes(text[]), lock_box_changes(text[])
    TO cardbox_tenant, cardbox_sweeper, cardbox_admin;

-- The sweeper's compaction of the usage log (00013) deleted every tenant's
-- log rows, then inserted or updated their totals, whose foreign key and
-- rows a deletion holds: it locks the tenants of the rows it folds first.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION compact_cardbox_usage() RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH locked AS MATERIALIZED (
        SELECT lock_box_changes(array_agg(DISTINCT tenant_id)) AS ok FROM cardbox_usage_log
    ),
    gone AS (
        DELETE FROM cardbox_usage_log l USING locked WHERE locked.ok RETURNING l.tenant_id, l.bytes
    )
    INSERT INTO tenant_usage AS u (tenant_id, cardbox_bytes)
    SELECT tenant_id, sum(bytes)::bigint FROM gone GROUP BY tenant_id
    ON CONFLICT (tenant_id) DO UPDATE SET cardbox_bytes = u.cardbox_bytes + excluded.cardbox_bytes
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION compact_cardbox_usage() RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH gone AS (
        DELETE FROM cardbox_usage_log RETURNING tenant_id, bytes
    )
    INSERT INTO tenant_usage AS u (tenant_id, cardbox_bytes)
    SELECT tenant_id, sum(bytes)::bigint FROM gone GROUP BY tenant_id
    ON CONFLICT (tenant_id) DO UPDATE SET cardbox_bytes = u.cardbox_bytes + excluded.cardbox_bytes
$$;
-- +goose StatementEnd
DROP FUNCTION lock_box_changes(text[]);
DROP FUNCTION lock_card_changes(text[]);
