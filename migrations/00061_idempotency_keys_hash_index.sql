-- The index that finds an idempotency key, (tenant_id, context_id,
-- idempotency_key) as a btree, cost each keyed append more than the key's
-- row and its other index together (docs/performance.md, "Idempotency
-- keys: what a key costs Postgres"): keys are random, so every insert went
-- to a random leaf of a wide index (the tenant's name, the context and the
-- key in each entry), and after each checkpoint nearly every insert wrote
-- that leaf's full page to the WAL.
--
-- Now a hash index finds a key: its entries are a 4-byte hash and the row's
-- address, a third of the btree's size. It hashes the context and the key
-- together (int8send(context_id) || idempotency_key: the context number is
-- 8 bytes, so the value names one pair), as context numbers are unique
-- across tenants; keys reused in many contexts ("1", "2", ...) do not
-- share a bucket. Lookups (ListIdempotencyKeys) ask by that expression.
--
-- A context's deletion (BuryTurns) finds the keys of its turns by the same
-- index, from the turn rows, which hold their key and context too. A
-- tenant's deletion reads the table through (it holds a day of keys at
-- most), and no longer waits for a context's or a turn's keys to go before
-- it: since 00053 no foreign key ties them. The index on created_at stays
-- (the start-up load of the newest keys and the purge): its inserts go to
-- its right edge.

-- +goose Up
CREATE INDEX idempotency_keys_context_key ON idempotency_keys USING hash ((int8send(context_id) || idempotency_key));
DROP INDEX idempotency_keys_key;

-- +goose Down
CREATE INDEX idempotency_keys_key ON idempotency_keys (tenant_id, context_id, idempotency_key);
DROP INDEX idempotency_keys_context_key;
