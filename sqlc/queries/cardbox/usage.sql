-- name: CompactCardBoxUsage :exec
-- Folds the log of CardBox byte changes into tenant_usage (the sweeper
-- does, every pass).
SELECT compact_cardbox_usage();
