-- Hosted mode: each tenant's request rate limit, set with
-- `cardbox tenant limits`; NULL takes the server's default
-- (--tenant-rate, --tenant-burst).

-- +goose Up
ALTER TABLE tenants
    ADD COLUMN rate_per_sec double precision CHECK (rate_per_sec > 0),
    ADD COLUMN rate_burst   integer CHECK (rate_burst > 0);

-- +goose Down
ALTER TABLE tenants DROP COLUMN rate_burst, DROP COLUMN rate_per_sec;
