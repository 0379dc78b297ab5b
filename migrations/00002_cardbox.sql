-- CardBox: cards (immutable facts) and boxes (ordered lists of card ids).
--
-- Every key leads with tenant_id (the project id): the same card_id or
-- box_id in two projects names two rows, and no write of one project can
-- reach another's. A box keeps its card ids as an ordered array, so an
-- append is one row update (atomic under the row lock) and a batch read is
-- one query per table.

-- +goose Up
CREATE TABLE cards (
    tenant_id    text NOT NULL REFERENCES tenants (tenant_id),
    card_id      text NOT NULL CHECK (card_id <> ''),
    content      jsonb,
    tool_calls   jsonb,
    tool_call_id text,
    ttl_seconds  integer CHECK (ttl_seconds > 0),
    -- created_at + ttl_seconds; NULL when the card never expires.
    expires_at   timestamptz,
    deleted_at   timestamptz,
    metadata     jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, card_id)
);
-- For the sweeper.
CREATE INDEX cards_expires_at ON cards (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX cards_deleted_at ON cards (deleted_at) WHERE deleted_at IS NOT NULL;

CREATE TABLE boxes (
    tenant_id  text NOT NULL REFERENCES tenants (tenant_id),
    box_id     text NOT NULL CHECK (box_id <> ''),
    -- card ids in box order; they name cards of the same tenant.
    card_ids   text[] NOT NULL DEFAULT '{}',
    -- the boxes this one was derived from.
    parent_ids text[] NOT NULL DEFAULT '{}',
    metadata   jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz,
    PRIMARY KEY (tenant_id, box_id)
);
CREATE INDEX boxes_deleted_at ON boxes (deleted_at) WHERE deleted_at IS NOT NULL;

-- +goose Down
DROP TABLE boxes;
DROP TABLE cards;
