-- Every feature with an owner that is not a superuser (docs/operations.md):
-- the schema's owner sees and writes every row of the tables with forced
-- row-level security.
--
-- Row-level security is forced on the tenants' tables (00011, 00013, 00015,
-- 00016), so it applies to their owner too unless the owner is a superuser
-- or BYPASSRLS, and no policy named the owner (but sql_roles', 00016). The
-- embedded cluster's owner is a superuser, which hid it; at a URL whose
-- role is an ordinary owner (a managed Postgres: NOSUPERUSER NOBYPASSRLS
-- CREATEROLE) everything that runs as the owner saw no row and could write
-- none:
--
--   - the SECURITY DEFINER functions, which run as their owner:
--     add_cardbox_bytes (every card and box write, through the usage
--     triggers of 00013: "new row violates row-level security policy for
--     table cardbox_usage_log", a 500), compact_cardbox_usage (folded
--     nothing), lock_card_changes and lock_box_changes (locked no tenant,
--     so the lock order of 00024 held nowhere), count_card_changes
--     (raised on card deletes); cardbox_sql_tenant reads sql_roles, which
--     had its policy; end_earlier_sessions reads no table;
--   - the statements the CLI runs as the session's own role, the owner
--     (internal/auth's ownerAuditedTx: cardbox sql-role create found "no
--     such tenant", cardbox tenant create --sql-role could not insert the
--     tenant or its audit record);
--   - the migrations themselves, which run as the owner: a migration that
--     reads or rewrites existing rows (00013 counted the cards and boxes
--     there were, 00019 filled turn_data.parent_turn_id) would see none.
--
-- Why a policy for the owner, and not a role of its own for the functions:
-- the owner may already do everything such a policy allows, by other
-- means (it may ALTER TABLE ... NO FORCE ROW LEVEL SECURITY, drop the
-- policies, or replace the functions), so admitting it gives no role any
-- right it lacked: the least privilege that makes the functions, the
-- CLI's statements and the migrations work. A dedicated definer role would
-- narrow what a flawed SECURITY DEFINER function could reach, but the
-- owner's own statements and the migrations would still need this policy,
-- and moving the functions to it needs CREATE on the schema for that role
-- and a role cardbox may not be able to create (an owner without
-- CREATEROLE). No other role is a member of the owner, so the policy
-- admits nobody else: the path roles, analysts and cardbox_server are
-- untouched, and cardbox_server only becomes the owner by RESET ROLE,
-- which the server at a URL could always do (it logs in as the owner).
--
-- The policy names the owner as the migration runs (CURRENT_USER: the
-- tables' owner, who alone may create policies on them), on every table
-- of the schema with row-level security, those of migrations before this
-- one included; it is created where missing, so sql_roles keeps its
-- owner_rows of 00016. A later migration that forces row-level security on
-- a table adds the same policy (migrations_test checks it).
--
-- cardbox_sql_setup() (00012) created cardbox_analyst unconditionally,
-- which fails without CREATEROLE even when the role exists: it now creates
-- it only when missing, so that an owner without CREATEROLE whose
-- database administrator made the roles gets the analysts' grants and
-- policies (SQL roles themselves still need CREATEROLE).

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c
             WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind IN ('r', 'p') AND c.relrowsecurity
               AND NOT EXISTS (SELECT FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'owner_rows')
             ORDER BY c.relname
    LOOP
        EXECUTE format('CREATE POLICY owner_rows ON %I TO CURRENT_USER USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cardbox_sql_setup() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t text;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'cardbox_analyst') THEN
        BEGIN
            CREATE ROLE cardbox_analyst NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END IF;
    -- Each step only when missing: this runs at every sql-role create.
    IF NOT has_function_privilege('cardbox_analyst', 'cardbox_sql_tenant()', 'EXECUTE') THEN
        GRANT EXECUTE ON FUNCTION cardbox_sql_tenant() TO cardbox_analyst;
    END IF;
    FOREACH t IN ARRAY ARRAY['turns', 'turn_metadata', 'contexts', 'cards', 'boxes'] LOOP
        IF NOT has_table_privilege('cardbox_analyst', t, 'SELECT') THEN
            EXECUTE format('GRANT SELECT ON %I TO cardbox_analyst', t);
        END IF;
        IF NOT (SELECT relrowsecurity FROM pg_class WHERE oid = t::regclass) THEN
            EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        END IF;
        IF NOT EXISTS (SELECT FROM pg_policy WHERE polrelid = t::regclass AND polname = 'analyst_read') THEN
            EXECUTE format('CREATE POLICY analyst_read ON %I AS PERMISSIVE FOR SELECT TO cardbox_analyst '
                           'USING (tenant_id = cardbox_sql_tenant())', t);
        END IF;
        IF NOT EXISTS (SELECT FROM pg_policy WHERE polrelid = t::regclass AND polname = 'analyst_own_tenant') THEN
            EXECUTE format('CREATE POLICY analyst_own_tenant ON %I AS RESTRICTIVE FOR SELECT TO cardbox_analyst '
                           'USING (tenant_id = cardbox_sql_tenant())', t);
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- The analysts' grants and policies, where 00012 could not make them
-- (cardbox_analyst made by a database administrator for an owner without
-- CREATEROLE).
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM cardbox_sql_setup();
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'cardbox: SQL analyst roles are unavailable: %', SQLERRM
        USING HINT = 'Grant CREATEROLE to the role cardbox connects as, or create the role cardbox_analyst (docs/operations.md).';
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cardbox_sql_setup() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t text;
BEGIN
    BEGIN
        CREATE ROLE cardbox_analyst NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
        NULL;
    END;
    -- Each step only when missing: this runs at every sql-role create.
    IF NOT has_function_privilege('cardbox_analyst', 'cardbox_sql_tenant()', 'EXECUTE') THEN
        GRANT EXECUTE ON FUNCTION cardbox_sql_tenant() TO cardbox_analyst;
    END IF;
    FOREACH t IN ARRAY ARRAY['turns', 'turn_metadata', 'contexts', 'cards', 'boxes'] LOOP
        IF NOT has_table_privilege('cardbox_analyst', t, 'SELECT') THEN
            EXECUTE format('GRANT SELECT ON %I TO cardbox_analyst', t);
        END IF;
        IF NOT (SELECT relrowsecurity FROM pg_class WHERE oid = t::regclass) THEN
            EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        END IF;
        IF NOT EXISTS (SELECT FROM pg_policy WHERE polrelid = t::regclass AND polname = 'analyst_read') THEN
            EXECUTE format('CREATE POLICY analyst_read ON %I AS PERMISSIVE FOR SELECT TO cardbox_analyst '
                           'USING (tenant_id = cardbox_sql_tenant())', t);
        END IF;
        IF NOT EXISTS (SELECT FROM pg_policy WHERE polrelid = t::regclass AND polname = 'analyst_own_tenant') THEN
            EXECUTE format('CREATE POLICY analyst_own_tenant ON %I AS RESTRICTIVE FOR SELECT TO cardbox_analyst '
                           'USING (tenant_id = cardbox_sql_tenant())', t);
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd
-- sql_roles' owner_rows is 00016's.
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_policy p ON p.polrelid = c.oid AND p.polname = 'owner_rows'
             WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relname <> 'sql_roles'
    LOOP
        EXECUTE format('DROP POLICY owner_rows ON %I', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
