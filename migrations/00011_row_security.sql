-- Row-level security: tenant isolation enforced by Postgres, not only by
-- cardbox's own WHERE clauses (docs/security.md, "Isolation in Postgres").
--
-- The server connects as cardbox_server, which is neither superuser nor
-- owner nor BYPASSRLS and holds no privileges of its own (NOINHERIT): each
-- statement first takes the role of its path with
-- set_config('role', ..., true), and request statements also name their
-- tenant with set_config('cardbox.tenant', ..., true) (internal/pgrole).
--
--   cardbox_tenant     request handling: one tenant's rows, as the tenant
--                      setting says; a statement that sets none sees none
--   cardbox_committer  the group commit: inserts turns, heads, keys, grants
--                      of many tenants in one statement
--   cardbox_recovery   start-up recovery, fencing, verify and recover:
--                      reads every tenant's index rows
--   cardbox_sweeper    TTL purge of cards and boxes, idempotency key expiry
--   cardbox_lookup     key and tenant lookup before a tenant is known
--   cardbox_admin      tenant and key administration (CLI, /admin)
--
-- Roles are cluster-wide, so they are created only if missing (databases
-- made from one template, or several cardbox databases, share them), and
-- the down migration leaves them. A role that exists is not created again,
-- and a membership that exists is not granted again, so that an owner
-- without CREATEROLE works once a database administrator made them
-- (docs/operations.md, "Roles made by a database administrator"); without
-- them such an owner fails here, naming what to run.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    r text;
    missing text[] := '{}';
BEGIN
    FOREACH r IN ARRAY ARRAY['cardbox_tenant', 'cardbox_committer', 'cardbox_recovery',
                             'cardbox_sweeper', 'cardbox_lookup', 'cardbox_admin', 'cardbox_server']
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
    -- The path roles to cardbox_server; cardbox_server to the migrating
    -- role (the schema's owner), which the server at a URL logs in as and
    -- which so may take cardbox_server and the path roles (a superuser
    -- may anyway).
    FOREACH r IN ARRAY ARRAY['cardbox_tenant', 'cardbox_committer', 'cardbox_recovery',
                             'cardbox_sweeper', 'cardbox_lookup', 'cardbox_admin']
    LOOP
        CONTINUE WHEN EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                              JOIN pg_roles s ON s.oid = m.member
                              WHERE g.rolname = r AND s.rolname = 'cardbox_server');
        BEGIN
            EXECUTE format('GRANT %I TO cardbox_server', r);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE EXCEPTION 'cardbox: role % may not grant cardbox''s roles; a superuser must run once: GRANT % TO cardbox_server; (docs/operations.md)',
                current_user, quote_ident(r) USING ERRCODE = 'insufficient_privilege';
        END;
    END LOOP;
    IF NOT EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                   JOIN pg_roles s ON s.oid = m.member
                   WHERE g.rolname = 'cardbox_server' AND s.rolname = current_user) THEN
        BEGIN
            EXECUTE format('GRANT cardbox_server TO %I', current_user);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE EXCEPTION 'cardbox: role % may not grant cardbox''s roles; a superuser must run once: GRANT cardbox_server TO %; (docs/operations.md)',
                current_user, quote_ident(current_user) USING ERRCODE = 'insufficient_privilege';
        END;
    END IF;
END
$$;
-- +goose StatementEnd

-- Request handling: everything a tenant's requests read and write.
GRANT SELECT, INSERT ON tenants TO cardbox_tenant;
GRANT SELECT, INSERT, UPDATE, DELETE ON contexts, turns, idempotency_keys, fs_attachments,
    tenant_blobs, turn_types, cards, boxes, registry_bundles, turn_metadata TO cardbox_tenant;
GRANT USAGE ON SEQUENCE context_id_seq TO cardbox_tenant;

-- The group commit: its one statement (CommitAppendBatch) and the pack end.
GRANT INSERT ON turns, turn_types, idempotency_keys, tenant_blobs, fs_attachments TO cardbox_committer;
GRANT SELECT (tenant_id, turn_id) ON turns TO cardbox_committer;
-- ON CONFLICT DO UPDATE reads the row it updates: the keys are readable.
GRANT SELECT, UPDATE ON idempotency_keys TO cardbox_committer;
GRANT SELECT (tenant_id, context_id), UPDATE (head_turn_id, head_depth, updated_at) ON contexts TO cardbox_committer;
GRANT SELECT, INSERT, UPDATE, DELETE ON turn_log_commits TO cardbox_committer;

-- Recovery and fencing: reads every tenant's index, owns the store's own
-- tables, ends the sessions of a dead process.
GRANT SELECT ON tenants, contexts, turns, turn_types, idempotency_keys, fs_attachments TO cardbox_recovery;
GRANT SELECT, INSERT, UPDATE, DELETE ON turn_stores, turn_log_commits, pack_holes TO cardbox_recovery;
ALTER FUNCTION end_earlier_sessions(text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION end_earlier_sessions(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION end_earlier_sessions(text) TO cardbox_recovery;

-- The sweeper: deletes what expired, in every tenant.
GRANT SELECT, DELETE ON cards, boxes, idempotency_keys TO cardbox_sweeper;

-- Lookup: a key by its id, a tenant by its name, a tenant's limits.
GRANT SELECT ON api_keys, tenants TO cardbox_lookup;

-- Administration.
GRANT SELECT, INSERT, UPDATE ON tenants, api_keys TO cardbox_admin;
GRANT SELECT, INSERT ON audit_log TO cardbox_admin;

-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tenants', 'contexts', 'turns', 'idempotency_keys', 'fs_attachments',
                             'tenant_blobs', 'turn_types', 'cards', 'boxes', 'registry_bundles',
                             'turn_metadata', 'api_keys', 'audit_log']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        -- The request role sees and writes one tenant: the one its
        -- statement named. current_setting(..., true) is NULL when unset,
        -- and NULL matches no row.
        EXECUTE format($p$CREATE POLICY tenant_rows ON %I TO cardbox_tenant
                         USING (tenant_id = current_setting('cardbox.tenant', true))
                         WITH CHECK (tenant_id = current_setting('cardbox.tenant', true))$p$, t);
        -- The system paths work across tenants by design; what each may do
        -- is limited by its grants above.
        EXECUTE format($p$CREATE POLICY system_paths ON %I
                         TO cardbox_committer, cardbox_recovery, cardbox_sweeper, cardbox_lookup, cardbox_admin
                         USING (true) WITH CHECK (true)$p$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tenants', 'contexts', 'turns', 'idempotency_keys', 'fs_attachments',
                             'tenant_blobs', 'turn_types', 'cards', 'boxes', 'registry_bundles',
                             'turn_metadata', 'api_keys', 'audit_log']
    LOOP
        EXECUTE format('DROP POLICY tenant_rows ON %I', t);
        EXECUTE format('DROP POLICY system_paths ON %I', t);
        EXECUTE format('ALTER TABLE %I NO FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I DISABLE ROW LEVEL SECURITY', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
ALTER FUNCTION end_earlier_sessions(text) SECURITY INVOKER;
GRANT EXECUTE ON FUNCTION end_earlier_sessions(text) TO PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM cardbox_tenant, cardbox_committer, cardbox_recovery,
    cardbox_sweeper, cardbox_lookup, cardbox_admin;
REVOKE ALL ON SEQUENCE context_id_seq FROM cardbox_tenant;
