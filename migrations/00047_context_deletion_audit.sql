-- +goose Up
-- A context's deletion and its audit record are one statement, run in
-- the request role (MarkContextDeleted): no deletion without its record.
-- The row's tenant is the request's own (row-level security checks it).
GRANT INSERT ON audit_log TO cardbox_tenant;

-- +goose Down
REVOKE INSERT ON audit_log FROM cardbox_tenant;
