-- +goose Up
-- Type registry bundles as published (PUT /v1/registry/bundles/{id}), per
-- tenant, in publish order: the registry is rebuilt by applying them in
-- seq order. Bodies are kept byte for byte (the bundle's ETag is their
-- BLAKE3 hash).
CREATE TABLE registry_bundles (
    tenant_id    text NOT NULL REFERENCES tenants (tenant_id),
    bundle_id    text NOT NULL,
    seq          bigint NOT NULL GENERATED ALWAYS AS IDENTITY,
    body         bytea NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, bundle_id),
    UNIQUE (tenant_id, seq)
);

-- Context metadata (client tag, title, labels, provenance) extracted from
-- the first turn of a chain (depth 1), keyed by that turn. A context shows
-- the metadata of the root of its chain, so a fork shows its origin's.
-- Text is cleaned before it lands here (docs/cxdb-http.md): NUL and
-- invalid UTF-8 become U+FFFD.
CREATE TABLE turn_metadata (
    tenant_id    text NOT NULL,
    turn_id      bigint NOT NULL,
    client_tag   text,
    title        text,
    labels       text[],
    provenance   jsonb,
    extracted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, turn_id),
    FOREIGN KEY (tenant_id, turn_id) REFERENCES turns (tenant_id, turn_id)
);
CREATE INDEX turn_metadata_labels ON turn_metadata USING gin (labels);

-- The root turn (depth 1) of a context's chain, once it has one; 0 before.
-- metadata_done says the root's metadata was looked for (found or not), so
-- the start-up catch-up skips it.
ALTER TABLE contexts ADD COLUMN root_turn_id bigint NOT NULL DEFAULT 0;
ALTER TABLE contexts ADD COLUMN metadata_done boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE contexts DROP COLUMN metadata_done;
ALTER TABLE contexts DROP COLUMN root_turn_id;
DROP TABLE turn_metadata;
DROP TABLE registry_bundles;
