-- name: SessionRunning :one
-- Whether the Postgres session of process pid still runs: a transaction
-- of it whose COMMIT got no answer may still commit until the session has
-- ended (store/finisher.go, wasCommitted).
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity WHERE pid = @pid::integer);
