-- Analysts (migration 00012) read the analytics views (00015), which run
-- with their reader's rights: the tables under them need the analysts'
-- two policies too, keyed on the login role as in 00012. An analyst so
-- reads its own tenant's row of tenants and its own idempotency keys, and
-- no other tenant's.

-- +goose Up
-- sql_roles (00012) is a tenant's rows like the others: row-level security,
-- forced. The schema's owner makes analysts' roles (cardbox sql-role) and
-- owns cardbox_sql_tenant(), which reads it; administration removes a
-- deleted tenant's.
ALTER TABLE sql_roles ENABLE ROW LEVEL SECURITY;
ALTER TABLE sql_roles FORCE ROW LEVEL SECURITY;
CREATE POLICY owner_rows ON sql_roles TO CURRENT_USER USING (true) WITH CHECK (true);
CREATE POLICY system_paths ON sql_roles TO cardbox_admin USING (true) WITH CHECK (true);

-- Administration removes a deleted tenant's analytics rows with the rest
-- (sqlc/queries/tenantdelete.sql).
GRANT SELECT, DELETE ON turn_data, analytics_daily, analytics_children, analytics_usage, analytics_context_turns,
    analytics_keyed, analytics_tool_call_rows, analytics_watermarks, analytics_backfills TO cardbox_admin;

-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tenants', 'idempotency_keys', 'turn_data', 'analytics_daily', 'analytics_children',
                             'analytics_usage', 'analytics_context_turns', 'analytics_keyed', 'analytics_tool_call_rows']
    LOOP
        EXECUTE format('CREATE POLICY analyst_read ON %I AS PERMISSIVE FOR SELECT TO cardbox_analyst '
                       'USING (tenant_id = cardbox_sql_tenant())', t);
        EXECUTE format('CREATE POLICY analyst_own_tenant ON %I AS RESTRICTIVE FOR SELECT TO cardbox_analyst '
                       'USING (tenant_id = cardbox_sql_tenant())', t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP POLICY system_paths ON sql_roles;
DROP POLICY owner_rows ON sql_roles;
ALTER TABLE sql_roles NO FORCE ROW LEVEL SECURITY;
ALTER TABLE sql_roles DISABLE ROW LEVEL SECURITY;
REVOKE SELECT, DELETE ON turn_data, analytics_daily, analytics_children, analytics_usage, analytics_context_turns,
    analytics_keyed, analytics_tool_call_rows, analytics_watermarks, analytics_backfills FROM cardbox_admin;
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tenants', 'idempotency_keys', 'turn_data', 'analytics_daily', 'analytics_children',
                             'analytics_usage', 'analytics_context_turns', 'analytics_keyed', 'analytics_tool_call_rows']
    LOOP
        EXECUTE format('DROP POLICY analyst_read ON %I', t);
        EXECUTE format('DROP POLICY analyst_own_tenant ON %I', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
