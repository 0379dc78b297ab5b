package store

import (
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/internal/groupcommit"
)

// SetDedupHooks sets on o the hooks of a deduplication racing a
// compaction of the pack, for the package's external tests: putFound runs
// in PutBlob once it found the blob stored, before it claims it;
// beforeCommit in the committer just before each group's COMMIT;
// dedupWaits when a compaction of the pack waits for the deduplications
// in flight.
func SetDedupHooks(o *Options, putFound func(ident.Hash), beforeCommit, dedupWaits func()) {
	o.putFound, o.dedupWaits = putFound, dedupWaits
	o.hooks = &groupcommit.Hooks{BeforeCommit: beforeCommit}
}
