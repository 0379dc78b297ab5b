-- Every group commit inserts a turn_log_commits row, and its foreign key
-- to turn_stores ran a trigger query per group to find a row that always
-- exists: a store's row is inserted when the store is created and never
-- deleted, and the committer writes only its own store's id. The check
-- tripled the cost of inserting the row: 16-27 µs per insert against
-- 5-9 µs without it, in a loop of 5,000 (docs/performance.md, issue 13).

-- +goose Up
ALTER TABLE turn_log_commits DROP CONSTRAINT turn_log_commits_store_id_fkey;

-- +goose Down
ALTER TABLE turn_log_commits ADD CONSTRAINT turn_log_commits_store_id_fkey
    FOREIGN KEY (store_id) REFERENCES turn_stores (store_id);
