-- SQL analytics on turns (docs/analytics.md).
--
-- turn_data keeps each turn's typed payload as JSONB beside its row in
-- turns: the JSON the HTTP typed view renders with its default options,
-- projected off the append path by the server's projector
-- (cxdbcompat/analytics) as the role cardbox_projector. A turn whose type
-- is not registered, whose payload is too large or cannot be decoded has a
-- row with data NULL and skipped saying why, so catch-up never looks at it
-- again; a bundle published later re-projects what it changes (backfill).
--
-- The views answer the common questions. They are security_invoker, so
-- row-level security applies to whoever queries them: a tenant's analyst
-- sees its own rows only.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    r text;
    missing text[] := '{}';
BEGIN
    -- cardbox_analyst is made by the analyst roles' migration too; made
    -- here if missing so that this one works alone. Roles that exist are
    -- not created again (an owner without CREATEROLE: see 00011).
    FOREACH r IN ARRAY ARRAY['cardbox_projector', 'cardbox_analyst']
    LOOP
        CONTINUE WHEN EXISTS (SELECT FROM pg_roles WHERE rolname = r);
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN NOINHERIT NOSUPERUSER NOBYPASSRLS', r);
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN
                NULL; -- made concurrently by another database of the cluster
            WHEN insufficient_privilege THEN
                missing := missing || format('CREATE ROLE %I NOLOGIN NOINHERIT;', r);
        END;
    END LOOP;
    IF cardinality(missing) > 0 THEN
        RAISE EXCEPTION 'cardbox: role % may not create roles and cardbox''s are missing; a superuser must run once: % (docs/operations.md)',
            current_user, array_to_string(missing, ' ') USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                   JOIN pg_roles s ON s.oid = m.member
                   WHERE g.rolname = 'cardbox_projector' AND s.rolname = 'cardbox_server') THEN
        BEGIN
            GRANT cardbox_projector TO cardbox_server;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE EXCEPTION 'cardbox: role % may not grant cardbox''s roles; a superuser must run once: GRANT cardbox_projector TO cardbox_server; (docs/operations.md)',
                current_user USING ERRCODE = 'insufficient_privilege';
        END;
    END IF;
END
$$;
-- +goose StatementEnd

CREATE TABLE turn_data (
    tenant_id           text NOT NULL,
    turn_id             bigint NOT NULL,
    -- the declared type, as in turns, that data was projected with
    type_id             text NOT NULL,
    type_version        bigint NOT NULL,
    -- the typed view's data object; NULL when skipped
    data                jsonb,
    -- why data is NULL: too_large, unknown_type, undecodable, unreadable
    skipped             text CHECK (skipped IN ('too_large', 'unknown_type', 'undecodable', 'unreadable')),
    -- the tenant's registry generation (bundles published) projected with
    registry_generation bigint NOT NULL,
    projected_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, turn_id),
    FOREIGN KEY (tenant_id, turn_id) REFERENCES turns (tenant_id, turn_id),
    CHECK ((data IS NULL) = (skipped IS NOT NULL))
);
-- WHERE data @> '{"item_type": "user_input"}' and jsonpath queries.
CREATE INDEX turn_data_data ON turn_data USING gin (data jsonb_path_ops);
-- What the canonical conversation views filter by.
CREATE INDEX turn_data_item_type ON turn_data (tenant_id, (data ->> 'item_type')) WHERE data IS NOT NULL;
-- What a backfill looks for.
CREATE INDEX turn_data_skipped ON turn_data (tenant_id, skipped) WHERE skipped IS NOT NULL;

-- Rollups the projector keeps in the statement that writes turn_data,
-- counting each turn once (when its turn_data row is first inserted), so
-- that questions over every turn of a tenant read a few rows instead of
-- scanning turns. They trail the append by the projector's lag.
--
-- Turns appended per tenant, UTC day and declared type.
CREATE TABLE analytics_daily (
    tenant_id    text NOT NULL REFERENCES tenants (tenant_id),
    day          date NOT NULL,
    type_id      text NOT NULL,
    type_version bigint NOT NULL,
    turns        bigint NOT NULL,
    PRIMARY KEY (tenant_id, day, type_id, type_version)
);
-- Child turns per turn that has any.
CREATE TABLE analytics_children (
    tenant_id text NOT NULL,
    turn_id   bigint NOT NULL,
    children  bigint NOT NULL,
    PRIMARY KEY (tenant_id, turn_id)
);
CREATE INDEX analytics_children_forks ON analytics_children (tenant_id) INCLUDE (turn_id, children) WHERE children > 1;
-- Per tenant: turns, their payload bytes, and the bytes of their
-- turn_data.data (as stored, pg_column_size).
CREATE TABLE analytics_usage (
    tenant_id     text PRIMARY KEY REFERENCES tenants (tenant_id),
    turns         bigint NOT NULL,
    payload_bytes bigint NOT NULL,
    data_bytes    bigint NOT NULL
);
-- Turns appended per context, and those that carried an idempotency key
-- per context and UTC day.
CREATE TABLE analytics_context_turns (
    tenant_id  text NOT NULL,
    context_id bigint NOT NULL,
    turns      bigint NOT NULL,
    PRIMARY KEY (tenant_id, context_id)
);
CREATE TABLE analytics_keyed (
    tenant_id     text NOT NULL,
    context_id    bigint NOT NULL,
    day           date NOT NULL,
    keyed_appends bigint NOT NULL,
    PRIMARY KEY (tenant_id, context_id, day)
);
-- The tool calls of the canonical conversation items (spec section 9),
-- extracted from turn_data.data as it is written (and rewritten): one row
-- per tool call of an assistant_turn item (idx: its place in
-- turn.tool_calls), and one per legacy tool_call or tool_result item
-- (idx 0).
CREATE TABLE analytics_tool_call_rows (
    tenant_id     text NOT NULL,
    turn_id       bigint NOT NULL,
    idx           integer NOT NULL,
    source        text NOT NULL CHECK (source IN ('assistant_turn', 'tool_call', 'tool_result')),
    call_id       text,
    name          text,
    status        text,
    failed        boolean NOT NULL,
    error_message text,
    duration_ms   bigint,
    PRIMARY KEY (tenant_id, turn_id, idx),
    FOREIGN KEY (tenant_id, turn_id) REFERENCES turn_data (tenant_id, turn_id)
);
CREATE INDEX analytics_tool_call_rows_legacy ON analytics_tool_call_rows (tenant_id, call_id, turn_id) WHERE source = 'tool_call';

-- Per tenant, the turn up to which every committed turn has a turn_data
-- row: catch-up starts after it.
CREATE TABLE analytics_watermarks (
    tenant_id  text PRIMARY KEY REFERENCES tenants (tenant_id),
    turn_id    bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Re-projection after a bundle was published: per tenant and registry
-- generation, how far it went (turn ids in order), so that a crash resumes
-- it. done_at is set when it finished.
CREATE TABLE analytics_backfills (
    tenant_id     text NOT NULL REFERENCES tenants (tenant_id),
    generation    bigint NOT NULL,
    after_turn_id bigint NOT NULL DEFAULT 0,
    reprojected   bigint NOT NULL DEFAULT 0,
    started_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    done_at       timestamptz,
    PRIMARY KEY (tenant_id, generation)
);

-- The projector writes turn_data and its progress; it reads the turn rows
-- and tenants it needs to find work.
GRANT SELECT, INSERT, UPDATE ON turn_data, analytics_watermarks, analytics_backfills,
    analytics_daily, analytics_children, analytics_usage, analytics_context_turns, analytics_keyed TO cardbox_projector;
GRANT SELECT, INSERT, UPDATE, DELETE ON analytics_tool_call_rows TO cardbox_projector;
GRANT SELECT (tenant_id, turn_id, context_id, parent_turn_id, type_id, type_version, uncompressed_len, created_at,
              idempotency_key) ON turns TO cardbox_projector;
GRANT SELECT (tenant_id, tenant_no) ON tenants TO cardbox_projector;
-- Requests read a tenant's typed data (and delete nothing).
GRANT SELECT ON turn_data TO cardbox_tenant;

-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['turn_data', 'analytics_watermarks', 'analytics_backfills',
                             'analytics_daily', 'analytics_children', 'analytics_usage', 'analytics_context_turns',
                             'analytics_keyed', 'analytics_tool_call_rows']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_rows ON %I TO cardbox_tenant
                         USING (tenant_id = current_setting('cardbox.tenant', true))
                         WITH CHECK (tenant_id = current_setting('cardbox.tenant', true))$p$, t);
        EXECUTE format($p$CREATE POLICY system_paths ON %I
                         TO cardbox_committer, cardbox_recovery, cardbox_sweeper, cardbox_lookup, cardbox_admin,
                            cardbox_projector
                         USING (true) WITH CHECK (true)$p$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd
-- The projector works across tenants, like the other system paths; on the
-- tables of 00011 it may only read (its grants name the columns).
CREATE POLICY projector_reads ON turns FOR SELECT TO cardbox_projector USING (true);
CREATE POLICY projector_reads ON tenants FOR SELECT TO cardbox_projector USING (true);

-- Lineage of every turn: its parent, depth, the context it was appended
-- to, the root of that context's chain, and the contexts forked from it.
-- (Aggregates are joined, not correlated, so that a question over many
-- turns or contexts stays one pass over each table.)
CREATE VIEW analytics_lineage WITH (security_invoker = true) AS
SELECT t.tenant_id, t.turn_id, t.parent_turn_id, t.depth, t.context_id,
       NULLIF(c.root_turn_id, 0) AS chain_root_turn_id,
       coalesce(f.forked_context_ids, '{}') AS forked_context_ids,
       t.type_id, t.type_version, t.created_at
FROM turns t
LEFT JOIN contexts c ON c.tenant_id = t.tenant_id AND c.context_id = t.context_id
LEFT JOIN (SELECT fc.tenant_id, fc.base_turn_id, array_agg(fc.context_id ORDER BY fc.context_id) AS forked_context_ids
           FROM contexts fc JOIN turns bt ON bt.tenant_id = fc.tenant_id AND bt.turn_id = fc.base_turn_id
           WHERE fc.base_turn_id <> 0 AND fc.context_id <> bt.context_id
           GROUP BY fc.tenant_id, fc.base_turn_id) f
       ON f.tenant_id = t.tenant_id AND f.base_turn_id = t.turn_id;

-- Turns appended per tenant, declared type and day (UTC), as projected.
CREATE VIEW analytics_turns_per_type_day WITH (security_invoker = true) AS
SELECT tenant_id, day, type_id, type_version, turns FROM analytics_daily;

-- Each context's depth and fan-out: its head's depth, the turn and
-- context it was forked from, the turns appended to it (as projected), and
-- how many contexts were forked from its turns.
CREATE VIEW analytics_context_shape WITH (security_invoker = true) AS
SELECT c.tenant_id, c.context_id, c.head_turn_id, c.head_depth, c.base_turn_id,
       b.context_id AS forked_from_context_id,
       coalesce(n.turns, 0) AS turns_appended,
       coalesce(fk.forks, 0) AS forks,
       c.created_at, c.updated_at
FROM contexts c
LEFT JOIN turns b ON b.tenant_id = c.tenant_id AND b.turn_id = c.base_turn_id
LEFT JOIN analytics_context_turns n ON n.tenant_id = c.tenant_id AND n.context_id = c.context_id
LEFT JOIN (SELECT fc.tenant_id, bt.context_id, count(*) AS forks
           FROM contexts fc JOIN turns bt ON bt.tenant_id = fc.tenant_id AND bt.turn_id = fc.base_turn_id
           WHERE fc.base_turn_id <> 0 AND fc.context_id <> bt.context_id
           GROUP BY fc.tenant_id, bt.context_id) fk
       ON fk.tenant_id = c.tenant_id AND fk.context_id = c.context_id;

-- Fork points: turns with more than one child turn, or that contexts
-- other than their own were forked from. Child counts are the projector's
-- (analytics_children).
CREATE VIEW analytics_fork_points WITH (security_invoker = true) AS
WITH forks AS (
    SELECT f.tenant_id, f.base_turn_id AS turn_id, array_agg(f.context_id ORDER BY f.context_id) AS forked_context_ids
    FROM contexts f JOIN turns bt ON bt.tenant_id = f.tenant_id AND bt.turn_id = f.base_turn_id
    WHERE f.base_turn_id <> 0 AND f.context_id <> bt.context_id
    GROUP BY f.tenant_id, f.base_turn_id
),
points AS (
    SELECT tenant_id, turn_id FROM analytics_children WHERE children > 1
    UNION
    SELECT tenant_id, turn_id FROM forks
)
SELECT t.tenant_id, t.turn_id, t.context_id, t.depth,
       coalesce(ch.children, 0) AS child_turns,
       coalesce(fk.forked_context_ids, '{}') AS forked_context_ids
FROM points p
JOIN turns t ON t.tenant_id = p.tenant_id AND t.turn_id = p.turn_id
LEFT JOIN analytics_children ch ON ch.tenant_id = p.tenant_id AND ch.turn_id = p.turn_id
LEFT JOIN forks fk ON fk.tenant_id = p.tenant_id AND fk.turn_id = p.turn_id;

-- Tool calls of the canonical conversation types (spec section 9): each
-- tool call of an assistant_turn item, and each legacy tool_result item
-- (with the name of the latest tool_call item of its call_id). failed: the
-- call's status is error, it carries an error, or its result says success
-- false; a legacy result: is_error.
CREATE VIEW analytics_tool_calls WITH (security_invoker = true) AS
SELECT c.tenant_id, c.turn_id, t.context_id, t.created_at, c.source, c.call_id,
       c.name, c.status, c.failed, c.error_message, c.duration_ms
FROM analytics_tool_call_rows c
LEFT JOIN turns t ON t.tenant_id = c.tenant_id AND t.turn_id = c.turn_id
WHERE c.source = 'assistant_turn'
UNION ALL
SELECT c.tenant_id, c.turn_id, t.context_id, t.created_at, c.source, c.call_id,
       k.name, c.status, c.failed, c.error_message, c.duration_ms
FROM analytics_tool_call_rows c
LEFT JOIN turns t ON t.tenant_id = c.tenant_id AND t.turn_id = c.turn_id
LEFT JOIN LATERAL (
    SELECT k.name FROM analytics_tool_call_rows k
    WHERE k.tenant_id = c.tenant_id AND k.source = 'tool_call' AND k.call_id = c.call_id
    ORDER BY k.turn_id DESC LIMIT 1) k ON true
WHERE c.source = 'tool_result';

-- Idempotent appends per tenant, context and day (UTC): appends that
-- carried a key (as projected), and keys still held for replays (24 h) by
-- the day they were written. A replay itself writes nothing: it returns
-- the original turn.
CREATE VIEW analytics_idempotency WITH (security_invoker = true) AS
SELECT coalesce(a.tenant_id, h.tenant_id) AS tenant_id, coalesce(a.context_id, h.context_id) AS context_id,
       coalesce(a.day, h.day) AS day, coalesce(a.keyed_appends, 0) AS keyed_appends, coalesce(h.keys_held, 0) AS keys_held
FROM analytics_keyed a
FULL JOIN (SELECT tenant_id, context_id, (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS keys_held
           FROM idempotency_keys GROUP BY tenant_id, context_id, day) h
       ON h.tenant_id = a.tenant_id AND h.context_id = a.context_id AND h.day = a.day;

-- Storage per tenant: turns and their payload bytes (uncompressed, as
-- declared; identical payloads count each time) and the stored bytes of
-- their typed data, as projected; contexts, cards and boxes.
CREATE VIEW analytics_storage WITH (security_invoker = true) AS
SELECT n.tenant_id,
       coalesce(u.turns, 0) AS turns,
       coalesce(u.payload_bytes, 0) AS payload_bytes,
       (SELECT count(*) FROM contexts c WHERE c.tenant_id = n.tenant_id) AS contexts,
       coalesce(u.data_bytes, 0) AS turn_data_bytes,
       (SELECT count(*) FROM cards k WHERE k.tenant_id = n.tenant_id) AS cards,
       (SELECT count(*) FROM boxes b WHERE b.tenant_id = n.tenant_id) AS boxes
FROM tenants n
LEFT JOIN analytics_usage u ON u.tenant_id = n.tenant_id;

-- The chain of a turn, from it to its root (depth 1), for lineage
-- questions the views cannot answer with one join.
-- +goose StatementBegin
CREATE FUNCTION analytics_chain(tenant text, turn bigint)
RETURNS TABLE (turn_id bigint, parent_turn_id bigint, depth bigint, context_id bigint)
LANGUAGE sql STABLE SECURITY INVOKER AS $$
    WITH RECURSIVE chain AS (
        SELECT t.turn_id, t.parent_turn_id, t.depth, t.context_id FROM turns t
        WHERE t.tenant_id = tenant AND t.turn_id = turn
        UNION ALL
        SELECT p.turn_id, p.parent_turn_id, p.depth, p.context_id FROM chain c
        JOIN turns p ON p.tenant_id = tenant AND p.turn_id = c.parent_turn_id
    )
    SELECT * FROM chain
$$;
-- +goose StatementEnd

GRANT SELECT ON turn_data, analytics_daily, analytics_children, analytics_usage, analytics_context_turns,
    analytics_keyed, analytics_tool_call_rows, analytics_lineage, analytics_turns_per_type_day, analytics_context_shape,
    analytics_fork_points, analytics_tool_calls, analytics_idempotency, analytics_storage TO cardbox_analyst;
GRANT EXECUTE ON FUNCTION analytics_chain(text, bigint) TO cardbox_analyst;
-- The views run with their reader's rights (security_invoker), so the
-- analyst reads the tables under them too; row-level security decides
-- which rows.
GRANT SELECT ON tenants, contexts, turns, idempotency_keys, cards, boxes TO cardbox_analyst;

-- +goose Down
DROP FUNCTION analytics_chain(text, bigint);
DROP VIEW analytics_storage, analytics_idempotency, analytics_tool_calls, analytics_fork_points,
    analytics_context_shape, analytics_turns_per_type_day, analytics_lineage;
DROP POLICY projector_reads ON tenants;
DROP POLICY projector_reads ON turns;
DROP TABLE analytics_tool_call_rows;
DROP TABLE analytics_keyed;
DROP TABLE analytics_context_turns;
DROP TABLE analytics_usage;
DROP TABLE analytics_children;
DROP TABLE analytics_daily;
DROP TABLE analytics_backfills;
DROP TABLE analytics_watermarks;
DROP TABLE turn_data;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM cardbox_projector;
