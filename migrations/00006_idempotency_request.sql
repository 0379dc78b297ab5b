-- +goose Up
-- The parent turn an append asked for, as sent (0: after the head), so that
-- a key reused with another parent is told apart from a retry. NULL for keys
-- written before this column: their parent is not compared.
ALTER TABLE idempotency_keys ADD COLUMN requested_parent_turn_id bigint;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN requested_parent_turn_id;
