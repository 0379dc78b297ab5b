-- Deleting contexts, and which of their turns die.
--
-- A deleted context keeps its row as a tombstone (deleted_at): turns a
-- live fork still reads keep their context_id, and a context id is never
-- handed out again. reaped_at says its dead turns were worked out and
-- their rows removed; a context deleted but not yet reaped is reaped by
-- the next server to start, so a crash between the answer and the
-- reaping loses nothing.
--
-- dead_turns records the turns that died: their records stay in the
-- append-only turn log until a compaction, and recovery and cardbox
-- verify skip them. A turn dies only when its own context is deleted and
-- no live context's head reaches it through parent links.

-- +goose Up
ALTER TABLE contexts
    ADD COLUMN deleted_at timestamptz,
    ADD COLUMN reaped_at  timestamptz;
CREATE INDEX contexts_unreaped ON contexts (tenant_id, context_id)
    WHERE deleted_at IS NOT NULL AND reaped_at IS NULL;

CREATE TABLE dead_turns (
    tenant_id text NOT NULL REFERENCES tenants (tenant_id),
    turn_id   bigint NOT NULL,
    died_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, turn_id)
);
SELECT cardbox_protect_tenant_table('dead_turns'::regclass,
    ARRAY['cardbox_committer', 'cardbox_recovery', 'cardbox_sweeper', 'cardbox_lookup', 'cardbox_admin']);

-- Retention: delete a tenant's contexts idle (no append) longer than
-- idle_seconds and/or older than max_age_seconds. label '' is the
-- tenant's policy; another label's applies to the contexts carrying it
-- (the shortest of the policies that apply wins).
CREATE TABLE retention_policies (
    tenant_id       text NOT NULL REFERENCES tenants (tenant_id),
    label           text NOT NULL DEFAULT '',
    idle_seconds    bigint CHECK (idle_seconds > 0),
    max_age_seconds bigint CHECK (max_age_seconds > 0),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, label),
    CHECK (idle_seconds IS NOT NULL OR max_age_seconds IS NOT NULL)
);
SELECT cardbox_protect_tenant_table('retention_policies'::regclass,
    ARRAY['cardbox_committer', 'cardbox_recovery', 'cardbox_sweeper', 'cardbox_lookup', 'cardbox_admin']);

GRANT UPDATE (deleted_at) ON contexts TO cardbox_tenant;
GRANT SELECT ON dead_turns TO cardbox_tenant, cardbox_recovery;
GRANT SELECT, UPDATE (deleted_at, reaped_at) ON contexts TO cardbox_sweeper;
GRANT SELECT, DELETE ON turns, idempotency_keys, fs_attachments, turn_metadata, turn_data,
    analytics_tool_call_rows, analytics_context_turns TO cardbox_sweeper;
GRANT SELECT, INSERT ON dead_turns TO cardbox_sweeper;
GRANT SELECT, UPDATE (deleted_at) ON cards TO cardbox_sweeper;
GRANT SELECT ON retention_policies TO cardbox_sweeper, cardbox_tenant;
-- The retention sweeper leaves deleted tenants' contexts to their deletion.
GRANT SELECT (tenant_id, deleted_at) ON tenants TO cardbox_sweeper;
GRANT SELECT, INSERT, UPDATE, DELETE ON retention_policies, dead_turns TO cardbox_admin;

-- +goose Down
REVOKE SELECT (tenant_id, deleted_at) ON tenants FROM cardbox_sweeper;
DROP TABLE retention_policies;
DROP TABLE dead_turns;
DROP INDEX contexts_unreaped;
ALTER TABLE contexts DROP COLUMN reaped_at, DROP COLUMN deleted_at;
