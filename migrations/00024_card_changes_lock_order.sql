-- Card writes that count a change (00021) lock their tenants' rows before
-- their cards' rows, as a tenant's deletion does.
--
-- The statement trigger of 00021 updates a tenant's row after the
-- statement has locked the cards it changed: a soft delete or the
-- sweeper's purge held a card's row and waited for its tenant's, while a
-- tenant's deletion (LockTenantForDelete, then PurgeDeletedTenants) held
-- the tenant's row and waited for the card's. Postgres broke the cycle by
-- failing one of them (40P01, a 503 to the client). With the tenants
-- locked first, in tenant_id order, the two queue instead: a card write
-- that waited for a deletion then finds its cards gone.
--
-- FOR NO KEY UPDATE is the lock the trigger's UPDATE takes anyway, so
-- this adds no waiting: it only takes the lock earlier. It does not
-- conflict with the key-share locks of inserts' foreign keys.

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
REVOKE EXECUTE ON FUNCTION lock_card_changes(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lock_card_changes(text[]) TO cardbox_tenant, cardbox_sweeper, cardbox_admin;

-- +goose Down
DROP FUNCTION lock_card_changes(text[]);
