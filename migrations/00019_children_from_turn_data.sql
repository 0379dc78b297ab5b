-- Child turns are counted when a fork point is asked for, from an index
-- of turn_data by parent, instead of by a rollup row per parent turn: the
-- rollup's upsert was a third of the projector's Postgres time per turn
-- (every turn of a linear context has a parent, so each made a row), the
-- index entry costs a fraction of it (docs/performance.md, SQL
-- analytics). Counts stay "as projected": a turn counts as a child once
-- its turn_data row is written.

-- +goose Up
ALTER TABLE turn_data ADD COLUMN parent_turn_id bigint;
UPDATE turn_data d SET parent_turn_id = t.parent_turn_id
FROM turns t WHERE t.tenant_id = d.tenant_id AND t.turn_id = d.turn_id;
ALTER TABLE turn_data ALTER COLUMN parent_turn_id SET NOT NULL;
CREATE INDEX turn_data_parent ON turn_data (tenant_id, parent_turn_id) WHERE parent_turn_id <> 0;

-- Fork points: turns with more than one child turn, or that contexts
-- other than their own were forked from.
CREATE OR REPLACE VIEW analytics_fork_points WITH (security_invoker = true) AS
WITH forks AS (
    SELECT f.tenant_id, f.base_turn_id AS turn_id, array_agg(f.context_id ORDER BY f.context_id) AS forked_context_ids
    FROM contexts f JOIN turns bt ON bt.tenant_id = f.tenant_id AND bt.turn_id = f.base_turn_id
    WHERE f.base_turn_id <> 0 AND f.context_id <> bt.context_id
    GROUP BY f.tenant_id, f.base_turn_id
),
points AS (
    SELECT tenant_id, parent_turn_id AS turn_id FROM turn_data WHERE parent_turn_id <> 0
    GROUP BY tenant_id, parent_turn_id HAVING count(*) > 1
    UNION
    SELECT tenant_id, turn_id FROM forks
)
SELECT t.tenant_id, t.turn_id, t.context_id, t.depth,
       (SELECT count(*) FROM turn_data c WHERE c.tenant_id = p.tenant_id AND c.parent_turn_id = p.turn_id) AS child_turns,
       coalesce(fk.forked_context_ids, '{}') AS forked_context_ids
FROM points p
JOIN turns t ON t.tenant_id = p.tenant_id AND t.turn_id = p.turn_id
LEFT JOIN forks fk ON fk.tenant_id = p.tenant_id AND fk.turn_id = p.turn_id;

DROP TABLE analytics_children;

-- +goose Down
CREATE TABLE analytics_children (
    tenant_id text NOT NULL,
    turn_id   bigint NOT NULL,
    children  bigint NOT NULL,
    PRIMARY KEY (tenant_id, turn_id)
);
CREATE INDEX analytics_children_forks ON analytics_children (tenant_id) INCLUDE (turn_id, children) WHERE children > 1;
INSERT INTO analytics_children (tenant_id, turn_id, children)
SELECT tenant_id, parent_turn_id, count(*) FROM turn_data WHERE parent_turn_id <> 0 GROUP BY tenant_id, parent_turn_id;
GRANT SELECT, INSERT, UPDATE ON analytics_children TO cardbox_projector;
GRANT SELECT, DELETE ON analytics_children TO cardbox_admin;
GRANT SELECT ON analytics_children TO cardbox_analyst;
ALTER TABLE analytics_children ENABLE ROW LEVEL SECURITY;
ALTER TABLE analytics_children FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON analytics_children TO cardbox_tenant
    USING (tenant_id = current_setting('cardbox.tenant', true))
    WITH CHECK (tenant_id = current_setting('cardbox.tenant', true));
CREATE POLICY system_paths ON analytics_children
    TO cardbox_committer, cardbox_recovery, cardbox_sweeper, cardbox_lookup, cardbox_admin, cardbox_projector
    USING (true) WITH CHECK (true);
CREATE POLICY analyst_read ON analytics_children AS PERMISSIVE FOR SELECT TO cardbox_analyst
    USING (tenant_id = cardbox_sql_tenant());
CREATE POLICY analyst_own_tenant ON analytics_children AS RESTRICTIVE FOR SELECT TO cardbox_analyst
    USING (tenant_id = cardbox_sql_tenant());

CREATE OR REPLACE VIEW analytics_fork_points WITH (security_invoker = true) AS
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

DROP INDEX turn_data_parent;
ALTER TABLE turn_data DROP COLUMN parent_turn_id;
