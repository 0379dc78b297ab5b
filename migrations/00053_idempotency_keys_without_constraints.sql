-- A group's statement wrote each idempotency key with three costs beyond
-- its row and its two indexes, each measured per key (docs/performance.md):
--
-- * two foreign keys, to contexts and to turns: a trigger query per key
--   each, at the end of the statement, the one to turns also locking the
--   turn's new row (FOR KEY SHARE: a WAL record). They only repeated what
--   the turn store guarantees: it writes a key in the same statement as
--   its turn, to a context it has checked exists (as turns' own key to
--   contexts, dropped by 00004);
-- * a unique primary key, which made the insert an upsert (ON CONFLICT DO
--   UPDATE: a probe of the index before each row, a speculative insertion
--   and its confirmation after) only so that a key reused after its 24 h
--   could replace its expired row before the purge deleted it.
--
-- The turn store is the only writer of keys and never writes a key that is
-- still live (it answers with the key's turn instead), so uniqueness was
-- never enforced here: the upsert replaced, it never refused. Now a reused
-- key adds a row beside its expired one, readers take the newest row of the
-- window (GetIdempotencyKey, ListNewestIdempotencyKeys), and the purge
-- deletes the expired row as before. The index on the same columns, no
-- longer unique, serves the lookups and deletions by tenant and context.

-- +goose Up
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_tenant_id_context_id_fkey;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_tenant_id_turn_id_fkey;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
CREATE INDEX idempotency_keys_key ON idempotency_keys (tenant_id, context_id, idempotency_key);
COMMENT ON TABLE idempotency_keys IS
    'idempotency keys of the last 24 h, written by the turn store with their turns; a key reused after its 24 h has a row beside its expired one until the purge deletes that: readers take the newest row of the window';
COMMENT ON COLUMN idempotency_keys.context_id IS
    'the context the key was used in: contexts (tenant_id, context_id); checked by the turn store, not by a foreign key, to keep appends cheap';
COMMENT ON COLUMN idempotency_keys.turn_id IS
    'the turn the key produced: turns (tenant_id, turn_id), written in the same statement; not a foreign key, to keep appends cheap';

-- +goose Down
COMMENT ON COLUMN idempotency_keys.turn_id IS NULL;
COMMENT ON COLUMN idempotency_keys.context_id IS NULL;
COMMENT ON TABLE idempotency_keys IS NULL;
-- the newest row of a key is the one a unique key keeps
DELETE FROM idempotency_keys k USING idempotency_keys newer
WHERE newer.tenant_id = k.tenant_id AND newer.context_id = k.context_id
  AND newer.idempotency_key = k.idempotency_key AND newer.created_at > k.created_at;
-- and keys whose turn is gone have nothing to name
DELETE FROM idempotency_keys k
WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.tenant_id = k.tenant_id AND t.turn_id = k.turn_id);
DROP INDEX idempotency_keys_key;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_pkey
    PRIMARY KEY (tenant_id, context_id, idempotency_key);
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_tenant_id_turn_id_fkey
    FOREIGN KEY (tenant_id, turn_id) REFERENCES turns (tenant_id, turn_id);
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_tenant_id_context_id_fkey
    FOREIGN KEY (tenant_id, context_id) REFERENCES contexts (tenant_id, context_id);
