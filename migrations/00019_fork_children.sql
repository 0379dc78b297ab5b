-- analytics_children keeps only turns with more than one child: a row per
-- parent turn was a third of the projector's Postgres time per turn
-- (every turn of a linear context has a parent; docs/performance.md, SQL
-- analytics). turn_data now records each turn's parent, indexed, so that
-- the projector counts a turn's earlier children when it gets another,
-- and a fork point with fewer children can be counted when asked.
-- Counts stay "as projected": a child counts once its turn_data row is
-- written.

-- +goose Up
ALTER TABLE turn_data ADD COLUMN parent_turn_id bigint;
UPDATE turn_data d SET parent_turn_id = t.parent_turn_id
FROM turns t WHERE t.tenant_id = d.tenant_id AND t.turn_id = d.turn_id;
ALTER TABLE turn_data ALTER COLUMN parent_turn_id SET NOT NULL;
CREATE INDEX turn_data_parent ON turn_data (tenant_id, parent_turn_id);
-- Statistics of the new column from the start: without them Postgres
-- guesses 200 distinct parents and reads the whole table to count one
-- turn's children.
ANALYZE turn_data;

DELETE FROM analytics_children WHERE children < 2;
DROP INDEX analytics_children_forks;
ANALYZE analytics_children;

-- Fork points: turns with more than one child turn, or that contexts
-- other than their own were forked from (counting their children from
-- turn_data when analytics_children has no row: fewer than two).
CREATE OR REPLACE VIEW analytics_fork_points WITH (security_invoker = true) AS
WITH forks AS (
    SELECT f.tenant_id, f.base_turn_id AS turn_id, array_agg(f.context_id ORDER BY f.context_id) AS forked_context_ids
    FROM contexts f JOIN turns bt ON bt.tenant_id = f.tenant_id AND bt.turn_id = f.base_turn_id
    WHERE f.base_turn_id <> 0 AND f.context_id <> bt.context_id
    GROUP BY f.tenant_id, f.base_turn_id
),
points AS (
    SELECT tenant_id, turn_id FROM analytics_children
    UNION
    SELECT tenant_id, turn_id FROM forks
)
SELECT t.tenant_id, t.turn_id, t.context_id, t.depth,
       coalesce(ch.children, (SELECT count(*) FROM turn_data c
                              WHERE c.tenant_id = p.tenant_id AND c.parent_turn_id = p.turn_id)) AS child_turns,
       coalesce(fk.forked_context_ids, '{}') AS forked_context_ids
FROM points p
JOIN turns t ON t.tenant_id = p.tenant_id AND t.turn_id = p.turn_id
LEFT JOIN analytics_children ch ON ch.tenant_id = p.tenant_id AND ch.turn_id = p.turn_id
LEFT JOIN forks fk ON fk.tenant_id = p.tenant_id AND fk.turn_id = p.turn_id;

-- +goose Down
INSERT INTO analytics_children (tenant_id, turn_id, children)
SELECT tenant_id, parent_turn_id, count(*) FROM turn_data WHERE parent_turn_id <> 0
GROUP BY tenant_id, parent_turn_id HAVING count(*) = 1;
CREATE INDEX analytics_children_forks ON analytics_children (tenant_id) INCLUDE (turn_id, children) WHERE children > 1;

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
