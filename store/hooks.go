package store

import "errors"

// step names a boundary inside a group commit, for fault injection.
type step int

const (
	stepFilesWritten step = iota // blobs and turn records fsynced, rows inserted but not committed
	stepCommitted                // Postgres committed, nothing published or acknowledged
)

// hooks let tests stop a group commit at a step boundary as a crash would:
// the committer abandons the group where it is (no rollback, no publish, no
// acknowledgement) and refuses further work. Reopening the directory and
// database then exercises recovery from exactly that state.
type hooks struct {
	crashAt func(step) bool
	// failCommit makes the finisher roll a group back instead of
	// committing it, as a refused COMMIT would.
	failCommit func() bool
	// beforeCommit runs in the finisher just before a group's COMMIT is
	// sent (a test stops Postgres there).
	beforeCommit func()
}

// errCrashed is what a simulated crash answers.
var errCrashed = errors.New("simulated crash")

func (h *hooks) crash(s step) bool {
	return h != nil && h.crashAt != nil && h.crashAt(s)
}

func (h *hooks) commitSending() {
	if h != nil && h.beforeCommit != nil {
		h.beforeCommit()
	}
}

func (h *hooks) commitFails() bool {
	return h != nil && h.failCommit != nil && h.failCommit()
}

// errInjected is what an injected commit failure reports.
var errInjected = errors.New("injected commit failure")
