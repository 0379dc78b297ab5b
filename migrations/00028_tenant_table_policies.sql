-- One function makes a tenant table's row-level security, and this
-- migration re-applies it to every tenant table, so that the rules are
-- written once instead of once per migration (00011, 00013 and 00015 each
-- wrote them out, with role lists that had begun to differ).
--
-- cardbox_protect_tenant_table(table, systems, readers) enables and forces
-- row-level security and (re)makes the table's policies:
--
--   tenant_rows   cardbox_tenant sees and writes the rows of the tenant its
--                 statement named (set_config('cardbox.tenant', ...);
--                 unset: NULL, which matches no row)
--   system_paths  the system path roles in systems work across tenants
--                 (what each may do is limited by its grants)
--   system_reads  the roles in readers read every tenant's rows (the
--                 analytics projector on turns and tenants; 00015 called
--                 it projector_reads)
--   owner_rows    the tables' owner, as 00027 explains
--
-- The analysts' policies (analyst_read, analyst_own_tenant) are not made
-- here: they exist only once cardbox_analyst does, and cardbox_sql_setup()
-- makes them. A new tenant table calls this function in its migration;
-- migrations_test compares every tenant table's policies with the list it
-- keeps, so a table that does not fails the tests.
--
-- Re-applying leaves every policy as it was, but projector_reads's new
-- name.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION cardbox_protect_tenant_table(tbl regclass, systems text[], readers text[] DEFAULT '{}')
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    quoted text;
BEGIN
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl);
    EXECUTE format('DROP POLICY IF EXISTS tenant_rows ON %s', tbl);
    EXECUTE format($p$CREATE POLICY tenant_rows ON %s TO cardbox_tenant
                     USING (tenant_id = current_setting('cardbox.tenant', true))
                     WITH CHECK (tenant_id = current_setting('cardbox.tenant', true))$p$, tbl);
    EXECUTE format('DROP POLICY IF EXISTS system_paths ON %s', tbl);
    IF cardinality(systems) > 0 THEN
        SELECT string_agg(quote_ident(r), ', ') INTO quoted FROM unnest(systems) r;
        EXECUTE format('CREATE POLICY system_paths ON %s TO %s USING (true) WITH CHECK (true)', tbl, quoted);
    END IF;
    EXECUTE format('DROP POLICY IF EXISTS projector_reads ON %s', tbl);
    EXECUTE format('DROP POLICY IF EXISTS system_reads ON %s', tbl);
    IF cardinality(readers) > 0 THEN
        SELECT string_agg(quote_ident(r), ', ') INTO quoted FROM unnest(readers) r;
        EXECUTE format('CREATE POLICY system_reads ON %s FOR SELECT TO %s USING (true)', tbl, quoted);
    END IF;
    EXECUTE format('DROP POLICY IF EXISTS owner_rows ON %s', tbl);
    EXECUTE format('CREATE POLICY owner_rows ON %s TO CURRENT_USER USING (true) WITH CHECK (true)', tbl);
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION cardbox_protect_tenant_table(regclass, text[], text[]) FROM PUBLIC;

-- The system paths of 00011 on every tenant table; the projector's too on
-- the tables it writes (00015); it reads turns and tenants.
-- +goose StatementBegin
DO $$
DECLARE
    paths CONSTANT text[] := ARRAY['cardbox_committer', 'cardbox_recovery', 'cardbox_sweeper',
                                   'cardbox_lookup', 'cardbox_admin'];
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['api_keys', 'audit_log', 'boxes', 'cardbox_usage_log', 'cards', 'contexts',
                             'fs_attachments', 'idempotency_keys', 'registry_bundles', 'tenant_blobs',
                             'tenant_usage', 'turn_metadata', 'turn_types']
    LOOP
        PERFORM cardbox_protect_tenant_table(t::regclass, paths);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['tenants', 'turns'] LOOP
        PERFORM cardbox_protect_tenant_table(t::regclass, paths, ARRAY['cardbox_projector']);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['analytics_backfills', 'analytics_children', 'analytics_context_turns',
                             'analytics_daily', 'analytics_keyed', 'analytics_tool_call_rows',
                             'analytics_usage', 'analytics_watermarks', 'turn_data']
    LOOP
        PERFORM cardbox_protect_tenant_table(t::regclass, array_append(paths, 'cardbox_projector'));
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER POLICY system_reads ON turns RENAME TO projector_reads;
ALTER POLICY system_reads ON tenants RENAME TO projector_reads;
DROP FUNCTION cardbox_protect_tenant_table(regclass, text[], text[]);
