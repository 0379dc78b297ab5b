-- Deleting a tenant (`cardbox tenant delete`, DELETE /admin/tenants/{id}).
--
-- Every row the tenant owns is removed at once, in one transaction, but
-- its row in tenants stays as a tombstone marked deleted_at: the local
-- files record tenants by number (tenant_no), and recovery and `cardbox
-- verify` tell a deleted tenant's turn records and blobs (known,
-- unreadable, left for a future compaction) from damage by it. Every read
-- treats a deleted tenant as one that never existed, and its id is never
-- used again: a new tenant of the same name is refused, so nothing of the
-- old tenant can ever be taken for the new one's.

-- +goose Up
ALTER TABLE tenants ADD COLUMN deleted_at timestamptz;

-- Administration counts and removes a deleted tenant's rows (row-level
-- security lets cardbox_admin see every tenant's; these grants let it
-- read and delete them). sql_roles has no row-level security: only the
-- owner and cardbox_admin reach it.
GRANT SELECT, DELETE ON contexts, turns, turn_metadata, fs_attachments, idempotency_keys, turn_types,
    tenant_blobs, registry_bundles, cards, boxes, api_keys, sql_roles, tenant_usage, cardbox_usage_log
    TO cardbox_admin;

-- A deleted tenant's cards and boxes, removed by the purge, log no
-- usage: nothing of the tenant may be left behind.
CREATE OR REPLACE FUNCTION add_cardbox_bytes(tenant text, delta bigint) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    INSERT INTO cardbox_usage_log (tenant_id, bytes)
    SELECT tenant, delta
    WHERE NOT EXISTS (SELECT 1 FROM tenants WHERE tenant_id = tenant AND deleted_at IS NOT NULL)
$$;

-- +goose Down
CREATE OR REPLACE FUNCTION add_cardbox_bytes(tenant text, delta bigint) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    INSERT INTO cardbox_usage_log (tenant_id, bytes) VALUES (tenant, delta)
$$;
REVOKE DELETE ON contexts, turns, turn_metadata, fs_attachments, idempotency_keys, turn_types,
    tenant_blobs, registry_bundles, cards, boxes, api_keys, sql_roles, tenant_usage, cardbox_usage_log
    FROM cardbox_admin;
ALTER TABLE tenants DROP COLUMN deleted_at;
