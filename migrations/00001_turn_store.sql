-- The turn store's facts. Bytes (payloads, turn records) live in the data
-- directory's append-only files; these tables say what exists.
--
-- Every tenant-owned table leads its primary key and foreign keys with
-- tenant_id, so the schema can later be distributed by tenant.
-- Unsigned 32-bit protocol values are stored as bigint: a client may send any
-- u32 and an integer column would overflow on the upper half.

-- +goose Up
CREATE TABLE tenants (
    tenant_id  text PRIMARY KEY CHECK (tenant_id <> ''),
    -- tenant_no is the compact number the local files record.
    tenant_no  integer NOT NULL GENERATED ALWAYS AS IDENTITY UNIQUE,
    name       text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Used when no authentication is configured.
INSERT INTO tenants (tenant_id, name) VALUES ('default', 'Default tenant');

-- Context ids come from one sequence so that a binary-protocol id names one
-- context whatever the tenant.
CREATE SEQUENCE context_id_seq AS bigint;

CREATE TABLE contexts (
    tenant_id    text NOT NULL REFERENCES tenants (tenant_id),
    context_id   bigint NOT NULL,
    head_turn_id bigint NOT NULL DEFAULT 0,
    head_depth   bigint NOT NULL DEFAULT 0,
    base_turn_id bigint NOT NULL DEFAULT 0,
    client_tag   text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, context_id)
);

CREATE TABLE turns (
    tenant_id        text NOT NULL,
    turn_id          bigint NOT NULL,
    -- the context the turn was appended to; forks share turns across contexts
    context_id       bigint NOT NULL,
    parent_turn_id   bigint NOT NULL,  -- 0 for a root turn
    depth            bigint NOT NULL,  -- 1 for a root turn
    type_id          text NOT NULL,
    type_version     bigint NOT NULL,
    encoding         bigint NOT NULL,  -- 1 = msgpack
    compression      bigint NOT NULL,  -- as sent: 0 none, 1 zstd
    uncompressed_len bigint NOT NULL,
    payload_hash     bytea NOT NULL,   -- BLAKE3-256 of the uncompressed payload
    fs_root_hash     bytea,
    idempotency_key  bytea,
    created_at       timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, turn_id),
    FOREIGN KEY (tenant_id, context_id) REFERENCES contexts (tenant_id, context_id)
);
-- What analysts filter by. Each index costs every append; a per-context
-- index was measured at about 8% of append throughput and left out.
CREATE INDEX turns_tenant_created_at ON turns (tenant_id, created_at);
CREATE INDEX turns_tenant_type ON turns (tenant_id, type_id, type_version);

CREATE TABLE idempotency_keys (
    tenant_id       text NOT NULL,
    context_id      bigint NOT NULL,
    idempotency_key bytea NOT NULL,
    turn_id         bigint NOT NULL,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, context_id, idempotency_key),
    FOREIGN KEY (tenant_id, context_id) REFERENCES contexts (tenant_id, context_id),
    FOREIGN KEY (tenant_id, turn_id) REFERENCES turns (tenant_id, turn_id)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- The filesystem snapshot attached to a turn (last attach wins).
CREATE TABLE fs_attachments (
    tenant_id    text NOT NULL,
    turn_id      bigint NOT NULL,
    fs_root_hash bytea NOT NULL,
    attached_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, turn_id),
    FOREIGN KEY (tenant_id, turn_id) REFERENCES turns (tenant_id, turn_id)
);

-- A blob belongs to the tenant that first stored it (recorded in the blob
-- pack) and to every tenant listed here: those that stored the same bytes
-- later. A tenant reads only blobs it owns.
CREATE TABLE tenant_blobs (
    tenant_id  text NOT NULL REFERENCES tenants (tenant_id),
    blob_hash  bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, blob_hash)
);

-- Compact numbers for declared type ids, recorded in the turn log.
CREATE TABLE turn_types (
    tenant_id text NOT NULL REFERENCES tenants (tenant_id),
    type_ref  integer NOT NULL,
    type_id   text NOT NULL,
    PRIMARY KEY (tenant_id, type_ref),
    UNIQUE (tenant_id, type_id)
);

-- The turn store whose files live in one data directory (its STORE_ID).
CREATE TABLE turn_stores (
    store_id   uuid PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- How far the local turn log is committed: every group commit inserts a
-- row in its own transaction. Insert-only, so groups in flight together
-- never wait on one row; recovery reads the latest, old rows are pruned.
CREATE TABLE turn_log_commits (
    store_id      uuid NOT NULL REFERENCES turn_stores (store_id),
    committed_end bigint NOT NULL,  -- byte offset: records before it are committed turns
    next_turn_id  bigint NOT NULL,
    committed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (store_id, committed_end)
);

-- +goose Down
DROP TABLE turn_log_commits;
DROP TABLE turn_stores;
DROP TABLE turn_types;
DROP TABLE tenant_blobs;
DROP TABLE fs_attachments;
DROP TABLE idempotency_keys;
DROP TABLE turns;
DROP TABLE contexts;
DROP SEQUENCE context_id_seq;
DROP TABLE tenants;
