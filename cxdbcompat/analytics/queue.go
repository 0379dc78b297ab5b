package analytics

import (
	"sync"
	"time"

	"github.com/cardboxhq/cardbox/internal/ident"
)

// job is one turn to project.
type job struct {
	tenant      ident.Tenant
	turnID      uint64
	typeID      string
	typeVersion uint32
	size        int64 // uncompressed payload bytes
	turn        turnFields
	at          time.Time // when it was committed (or queued, for live turns)
	payload     []byte    // the payload as committed; nil: read it from the store
}

// turnFields are the fields of a turn's row that the rollups count by, as
// the store committed them: the projector never reads them back.
type turnFields struct {
	contextID, parentID uint64
	created             time.Time
	keyed               bool // appended with an idempotency key
}

// queue is the bounded FIFO between the store's committer and the
// projector. push never blocks: what does not fit is dropped and
// remembered, for catch-up to find in Postgres.
type queue struct {
	mu   sync.Mutex
	jobs []job
	max  int
	// payloads is the bytes of the queued jobs' payloads, at most
	// maxPayloads: past it a job is queued without its payload, which the
	// projector then reads from the store.
	payloads, maxPayloads int
	dropped               int64     // turns dropped since start
	since                 time.Time // oldest drop not yet caught up; zero when none
	wake                  chan struct{}
}

func newQueue(max, maxPayloads int) *queue {
	return &queue{max: max, maxPayloads: maxPayloads, wake: make(chan struct{}, 1)}
}

// push queues jobs, dropping those past the bound.
func (q *queue) push(jobs []job) {
	q.mu.Lock()
	room := max(q.max-len(q.jobs), 0)
	if room < len(jobs) {
		q.dropped += int64(len(jobs) - room)
		if q.since.IsZero() {
			q.since = jobs[room].at
		}
		jobs = jobs[:room]
	}
	for i := range jobs {
		if q.payloads+len(jobs[i].payload) > q.maxPayloads {
			jobs[i].payload = nil
		}
		q.payloads += len(jobs[i].payload)
	}
	q.jobs = append(q.jobs, jobs...)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take removes up to n jobs from the head.
func (q *queue) take(n int) []job {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, len(q.jobs))
	out := make([]job, n)
	copy(out, q.jobs)
	for _, j := range out {
		q.payloads -= len(j.payload)
	}
	clear(q.jobs[:n])
	q.jobs = q.jobs[n:]
	if len(q.jobs) == 0 {
		q.jobs = nil // appends then start a new array, not the tail of the old
	}
	return out
}

// state returns the queue's length, the time of its oldest job (zero when
// empty), the drops since start and the oldest drop not caught up.
func (q *queue) state() (n int, oldest time.Time, dropped int64, dropSince time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) > 0 {
		oldest = q.jobs[0].at
	}
	return len(q.jobs), oldest, q.dropped, q.since
}

// takeDrops reports whether turns were dropped since the last call, and
// forgets them: the catch-up about to run finds them.
func (q *queue) takeDrops() (since time.Time, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	since, q.since = q.since, time.Time{}
	return since, !since.IsZero()
}
