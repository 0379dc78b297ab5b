-- Recovery's fence against a cardboxd process that died with transactions
-- still open in Postgres.
--
-- Every cardboxd process names its sessions application_name = prefix ||
-- a random token. A process killed with kill -9 can leave a group's
-- transaction that Postgres has not finished: its COMMIT may still sit in
-- the session's socket and land after the next process has read the
-- database and cut the turn log to what was committed, which would leave
-- committed turns without records. So recovery first ends every session
-- of another process with the prefix (pg_terminate_backend, waiting up to
-- 10 s for each to exit): once a session has exited, its transaction is
-- committed or gone. It returns how many sessions did not end in time.
-- Only a session whose own name has the prefix ends others: it could not
-- tell its own process's sessions otherwise.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION end_earlier_sessions(prefix text) RETURNS integer
LANGUAGE sql VOLATILE AS $$
    SELECT (count(*) FILTER (WHERE NOT pg_terminate_backend(pid, 10000)))::integer
    FROM pg_stat_activity
    WHERE datname = current_database()
      AND pid <> pg_backend_pid()
      AND starts_with(current_setting('application_name'), prefix)
      AND starts_with(application_name, prefix)
      AND application_name <> current_setting('application_name')
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION end_earlier_sessions(text);
