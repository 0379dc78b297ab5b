package groupcommit

import "errors"

// Step names a boundary inside a group commit, for fault injection.
type Step int

// The boundaries Hooks.CrashAt may stop a group at.
const (
	StepFilesWritten Step = iota // blobs and turn records fsynced, rows inserted but not committed
	StepCommitted                // Postgres committed, nothing published or acknowledged
)

// Hooks let tests stop a group commit at a step boundary as a crash would:
// the committer abandons the group where it is (no rollback, no publish,
// no acknowledgement) and refuses further work. Reopening the directory
// and database then exercises recovery from exactly that state.
type Hooks struct {
	CrashAt func(Step) bool
	// FailCommit makes the finisher roll a group back instead of
	// committing it, as a refused COMMIT would.
	FailCommit func() bool
	// BeforeCommit runs in the finisher just before a group's COMMIT is
	// sent (a test stops Postgres there).
	BeforeCommit func()
}

// ErrCrashed is what a simulated crash answers.
var ErrCrashed = errors.New("simulated crash")

func (h *Hooks) crash(s Step) bool {
	return h != nil && h.CrashAt != nil && h.CrashAt(s)
}

func (h *Hooks) commitSending() {
	if h != nil && h.BeforeCommit != nil {
		h.BeforeCommit()
	}
}

func (h *Hooks) commitFails() bool {
	return h != nil && h.FailCommit != nil && h.FailCommit()
}

// errInjected is what an injected commit failure reports.
var errInjected = errors.New("injected commit failure")
