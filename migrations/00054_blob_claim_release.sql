-- A tenant's claim to a blob is released once nothing of the tenant's own
-- needs it any more: no live turn's payload, no fs tree a live turn's fs
-- root reaches, no upload of the last grace period (24 h by default). The
-- turn store's reaper releases claims after it buries the dead turns of
-- deleted contexts; the bytes stay in the blob pack until a compaction
-- drops the blobs no tenant claims (UnclaimedBlobs).
--
-- released_blob_claims: the blob pack names a blob's first writer in the
-- record's header, which is never rewritten; a row here says that writer
-- released its claim, and reads answer it as for a blob it never stored.
-- A later upload or append of the same bytes by the tenant claims them
-- again as any other tenant would: with a row of tenant_blobs.
--
-- blob_puts: when each tenant last uploaded each blob (PUT_BLOB), for the
-- grace period: a client may upload before it appends or attaches. Rows
-- older than the grace are pruned by the reaper.
--
-- blob_claim_reviews: the blobs buried turns named (payloads, and fs roots
-- to walk), queued in the transaction that buries them so that a crash
-- loses none; the reaper works through them in batches. A review whose
-- blobs an upload or grant keeps for the grace waits until not_before.

-- +goose Up
CREATE TABLE released_blob_claims (
    tenant_id   text NOT NULL REFERENCES tenants (tenant_id),
    blob_hash   bytea NOT NULL,
    released_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, blob_hash)
);
-- UnclaimedBlobs and DropReleasedBlobClaims look a hash up whoever wrote it.
CREATE INDEX released_blob_claims_blob_hash ON released_blob_claims (blob_hash);
SELECT cardbox_protect_tenant_table('released_blob_claims'::regclass,
    ARRAY['cardbox_committer', 'cardbox_recovery', 'cardbox_sweeper', 'cardbox_lookup', 'cardbox_admin']);

CREATE TABLE blob_puts (
    tenant_id text NOT NULL REFERENCES tenants (tenant_id),
    blob_hash bytea NOT NULL,
    put_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, blob_hash)
);
CREATE INDEX blob_puts_put_at ON blob_puts (put_at);
SELECT cardbox_protect_tenant_table('blob_puts'::regclass,
    ARRAY['cardbox_committer', 'cardbox_recovery', 'cardbox_sweeper', 'cardbox_lookup', 'cardbox_admin']);

CREATE TABLE blob_claim_reviews (
    tenant_id text NOT NULL REFERENCES tenants (tenant_id),
    blob_hash bytea NOT NULL,
    fs_root   boolean NOT NULL,
    not_before timestamptz NOT NULL DEFAULT '-infinity',
    PRIMARY KEY (tenant_id, blob_hash, fs_root)
);
SELECT cardbox_protect_tenant_table('blob_claim_reviews'::regclass,
    ARRAY['cardbox_committer', 'cardbox_recovery', 'cardbox_sweeper', 'cardbox_lookup', 'cardbox_admin']);

-- UnclaimedBlobs asks whether any tenant holds a grant to a hash.
CREATE INDEX tenant_blobs_blob_hash ON tenant_blobs (blob_hash);

GRANT SELECT, INSERT, UPDATE ON blob_puts TO cardbox_tenant;
GRANT SELECT ON released_blob_claims TO cardbox_tenant, cardbox_recovery, cardbox_lookup;
GRANT SELECT ON tenant_blobs TO cardbox_sweeper;
GRANT DELETE ON tenant_blobs TO cardbox_sweeper;
GRANT SELECT, INSERT, DELETE ON released_blob_claims, blob_claim_reviews, blob_puts TO cardbox_sweeper;
GRANT UPDATE (not_before) ON blob_claim_reviews TO cardbox_sweeper;
GRANT SELECT, INSERT, UPDATE, DELETE ON released_blob_claims, blob_claim_reviews, blob_puts TO cardbox_admin;

-- +goose Down
REVOKE SELECT, DELETE ON tenant_blobs FROM cardbox_sweeper;
DROP INDEX tenant_blobs_blob_hash;
DROP TABLE blob_claim_reviews;
DROP TABLE blob_puts;
DROP TABLE released_blob_claims;
