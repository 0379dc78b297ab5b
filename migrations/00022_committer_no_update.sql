-- A group's statement now records the blob pack's end in the commit row it
-- inserts (the end is known before the group's blobs are written:
-- blobpack.Stage), so the committer no longer updates commit rows. Only
-- recovery records an end on an old row (SetPackEnd).

-- +goose Up
REVOKE UPDATE ON turn_log_commits FROM cardbox_committer;

-- +goose Down
GRANT UPDATE ON turn_log_commits TO cardbox_committer;
