-- The layouts of an idempotency key compared in docs/performance.md
-- ("Idempotency keys: what a key costs Postgres"), as rows of a group's
-- statement: 28 appends to distinct contexts of 64, each inserting its turn
-- (with the indexes of turns) and its key, then the heads' update, a
-- transaction per group. Run by .ci/key-layouts against a scratch
-- Postgres (superuser: it reads the backend's /proc/self/stat).
CREATE OR REPLACE FUNCTION public.cpu_ticks() RETURNS bigint LANGUAGE sql AS $$
  SELECT (split_part(s, ' ', 12))::bigint + (split_part(s, ' ', 13))::bigint
  FROM (SELECT substr(t, strpos(t, ')') + 2) AS s FROM pg_read_file('/proc/self/stat') t) x $$;
CREATE SEQUENCE IF NOT EXISTS public.turn_seq;
DO $$
DECLARE v text;
BEGIN
FOREACH v IN ARRAY ARRAY['none','now','brin','hash','kept','hasht','a','a2','nokeycol'] LOOP
  EXECUTE format('DROP SCHEMA IF EXISTS %I CASCADE; CREATE SCHEMA %I', v, v);
  EXECUTE format('SET search_path = %I', v);
  CREATE TABLE contexts (tenant_id text, context_id bigint, head_turn_id bigint, head_depth bigint, updated_at timestamptz, PRIMARY KEY (tenant_id, context_id));
  INSERT INTO contexts SELECT 'tenant-default', g, 0, 0, now() FROM generate_series(1, 64) g;
  CREATE TABLE turns (tenant_id text NOT NULL, turn_id bigint NOT NULL, context_id bigint NOT NULL, parent_turn_id bigint NOT NULL,
    depth bigint NOT NULL, type_id text NOT NULL, type_version bigint NOT NULL, encoding bigint NOT NULL, compression bigint NOT NULL,
    uncompressed_len bigint NOT NULL, payload_hash bytea NOT NULL, fs_root_hash bytea, idempotency_key bytea, created_at timestamptz NOT NULL,
    requested_parent_turn_id bigint, PRIMARY KEY (tenant_id, turn_id));
  CREATE INDEX ON turns (tenant_id, created_at);
  CREATE INDEX ON turns (tenant_id, type_id, type_version);
  CREATE INDEX ON turns (tenant_id) WHERE fs_root_hash IS NOT NULL;
  IF v IN ('a','a2') THEN
    CREATE INDEX ON turns (tenant_id, context_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
    IF v = 'a2' THEN CREATE INDEX ON turns (created_at) WHERE idempotency_key IS NOT NULL; END IF;
  ELSIF v <> 'none' THEN
    CREATE TABLE idempotency_keys (tenant_id text NOT NULL, context_id bigint NOT NULL, idempotency_key bytea NOT NULL, turn_id bigint NOT NULL,
      created_at timestamptz NOT NULL, requested_parent_turn_id bigint);
    IF v IN ('hash','kept','hasht') THEN CREATE INDEX ON idempotency_keys USING hash ((int8send(context_id) || idempotency_key));
    ELSE CREATE INDEX ON idempotency_keys (tenant_id, context_id, idempotency_key); END IF;
    IF v = 'hasht' THEN CREATE INDEX ON idempotency_keys (tenant_id, turn_id); END IF;
    IF v IN ('brin','hash') THEN CREATE INDEX ON idempotency_keys USING brin (created_at);
    ELSE CREATE INDEX ON idempotency_keys (created_at); END IF;
  END IF;
END LOOP;
END $$;
RESET search_path;
CREATE OR REPLACE PROCEDURE public.run5(v text, groups int, INOUT ticks bigint DEFAULT 0) LANGUAGE plpgsql AS $$
DECLARE t0 bigint; i int; base bigint; ctx0 int;
BEGIN
  EXECUTE format('SET LOCAL search_path = %I, public', v);
  t0 := cpu_ticks();
  FOR i IN 1..groups LOOP
    base := nextval('turn_seq') * 100; ctx0 := (i * 28) % 64;
    IF v IN ('none','a','a2') THEN
      WITH k AS (SELECT g, gen_random_uuid()::text::bytea AS key FROM generate_series(1,28) g)
      INSERT INTO turns (tenant_id, turn_id, context_id, parent_turn_id, depth, type_id, type_version, encoding, compression, uncompressed_len, payload_hash, idempotency_key, created_at, requested_parent_turn_id)
      SELECT 'tenant-default', base+g, 1 + (ctx0+g) % 64, base+g-1, g, 'bench.Msg', 1, 1, 0, 100, sha256(int8send(base+g)),
             CASE WHEN v = 'none' AND key IS NOT NULL THEN NULL ELSE key END, clock_timestamp(), NULL FROM k;
    ELSE
      WITH k AS (SELECT g, gen_random_uuid()::text::bytea AS key FROM generate_series(1,28) g),
      nt AS (INSERT INTO turns (tenant_id, turn_id, context_id, parent_turn_id, depth, type_id, type_version, encoding, compression, uncompressed_len, payload_hash, idempotency_key, created_at)
        SELECT 'tenant-default', base+g, 1 + (ctx0+g) % 64, base+g-1, g, 'bench.Msg', 1, 1, 0, 100, sha256(int8send(base+g)),
               CASE WHEN v = 'nokeycol' THEN NULL ELSE key END, clock_timestamp() FROM k)
      INSERT INTO idempotency_keys (tenant_id, context_id, idempotency_key, turn_id, created_at, requested_parent_turn_id)
        SELECT 'tenant-default', 1 + (ctx0+g) % 64, key, base+g, clock_timestamp(), NULL FROM k;
    END IF;
    UPDATE contexts c SET head_turn_id = base + 28, head_depth = 28, updated_at = now() WHERE c.context_id IN (SELECT 1 + (ctx0+g) % 64 FROM generate_series(1,28) g);
    COMMIT;
    EXECUTE format('SET LOCAL search_path = %I, public', v);
  END LOOP;
  ticks := cpu_ticks() - t0;
END $$;
