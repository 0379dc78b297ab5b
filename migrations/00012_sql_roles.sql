-- SQL access for analysts (docs/security.md, "SQL access for analysts").
--
-- An analyst logs in to Postgres as a role of their own, one that
-- `cardbox sql-role create` made for one tenant and recorded in sql_roles.
-- Every such role is a member of the group role cardbox_analyst, which may
-- SELECT the tables below; row-level security shows it the rows of the
-- tenant its session_user is recorded for, and nothing else. The policies
-- read no setting a session can change (SET, set_config, SET ROLE):
-- session_user is fixed at login.
--
-- Roles belong to the cluster, not to a database, and creating one needs
-- CREATEROLE. So the group role, its grants and its policies are made by
-- cardbox_sql_setup(), which this migration calls and `cardbox sql-role
-- create` calls again: where the migrating role lacks CREATEROLE (some
-- external servers), the migration warns instead of failing, and SQL roles
-- become available once an operator grants it.
--
-- Enabling row-level security changes nothing for the tables' owner, which
-- cardbox connects as (not forced here), but roles other than the owner,
-- cardbox_analyst and superusers see no rows of these tables from now on.
-- Migration 00011 (row-level security for the server's own roles) forces
-- it and adds policies of its own; the analysts' policies do not depend on
-- them, and a restrictive one keeps analysts to their tenant even where
-- another policy would let every role through.

-- +goose Up
CREATE TABLE sql_roles (
    role_name  text PRIMARY KEY,
    tenant_id  text NOT NULL REFERENCES tenants (tenant_id),
    created_at timestamptz NOT NULL DEFAULT now(),
    -- when the password was last replaced; NULL: never since created_at.
    rotated_at timestamptz
);
CREATE INDEX sql_roles_tenant ON sql_roles (tenant_id);

-- The tenant of the session's login role, or NULL. SECURITY DEFINER, so
-- that analysts need no access to sql_roles; the search path is fixed so
-- that a caller's cannot change what it reads (the schema is the one these
-- tables were created in).
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format($f$
        CREATE FUNCTION cardbox_sql_tenant() RETURNS text
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, %1$I, pg_temp
        AS $b$SELECT tenant_id FROM %1$I.sql_roles WHERE role_name = session_user$b$
    $f$, current_schema());
END $$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION cardbox_sql_tenant() FROM PUBLIC;

-- Idempotent: creates cardbox_analyst unless it exists (another database
-- of the cluster may have made it, concurrently too), grants it SELECT on
-- the analysts' tables, enables row-level security on them and adds the
-- policies that are missing. Never the keys, the audit log, blob
-- ownership, idempotency keys or the turn log's commits.
-- +goose StatementBegin
CREATE FUNCTION cardbox_sql_setup() RETURNS void LANGUAGE plpgsql AS $$
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
REVOKE EXECUTE ON FUNCTION cardbox_sql_setup() FROM PUBLIC;

-- +goose StatementBegin
DO $$
BEGIN
    PERFORM cardbox_sql_setup();
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'cardbox: SQL analyst roles are unavailable: %', SQLERRM
        USING HINT = 'Grant CREATEROLE to the role cardbox connects as, then run cardbox sql-role create.';
END $$;
-- +goose StatementEnd

-- +goose Down
-- The analysts' login roles go with this database's record of them. The
-- group role cardbox_analyst stays: roles belong to the cluster, and
-- other databases in it (another cardbox, test databases cloned from one
-- template) may still use it. Here it keeps no grant and no policy.
-- Row-level security is switched off again unless other policies use it
-- or it is forced (migration 00011 forces it for the server's roles).
-- +goose StatementBegin
DO $$
DECLARE
    t text;
    r text;
BEGIN
    FOR r IN SELECT role_name FROM sql_roles LOOP
        EXECUTE format('DROP ROLE IF EXISTS %I', r);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['turns', 'turn_metadata', 'contexts', 'cards', 'boxes'] LOOP
        EXECUTE format('DROP POLICY IF EXISTS analyst_read ON %I', t);
        EXECUTE format('DROP POLICY IF EXISTS analyst_own_tenant ON %I', t);
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'cardbox_analyst') THEN
            EXECUTE format('REVOKE SELECT ON %I FROM cardbox_analyst', t);
        END IF;
        IF NOT EXISTS (SELECT FROM pg_policy WHERE polrelid = t::regclass)
           AND NOT (SELECT relforcerowsecurity FROM pg_class WHERE oid = t::regclass) THEN
            EXECUTE format('ALTER TABLE %I DISABLE ROW LEVEL SECURITY', t);
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd
DROP FUNCTION cardbox_sql_setup();
DROP FUNCTION cardbox_sql_tenant();
DROP TABLE sql_roles;
