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

-- +goose Down
ALTER TABLE tenants DROP COLUMN deleted_at;
