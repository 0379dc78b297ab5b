package analytics

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cxdbcompat/analytics/internal/analyticsdb"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store"
)

// Source is what the projector reads turns and registries from: the CXDB
// service (*service.Service) over the store.
type Source interface {
	Tenant(ctx context.Context, id string) (ident.Tenant, error)
	TurnPayload(ctx context.Context, t ident.Tenant, id uint64) ([]byte, error)
	Registry(ctx context.Context, t ident.Tenant) (*registry.Registry, error)
}

// Options configure a Projector.
type Options struct {
	Source Source
	// Pool is the server's Postgres pool; the projector's statements run
	// as pgrole.Projector.
	Pool *pgxpool.Pool
	// MaxPayload is the largest payload projected; larger ones keep only
	// metadata (DefaultMaxPayload when 0).
	MaxPayload int64
	// QueueSize bounds the turns waiting (DefaultQueueSize when 0).
	QueueSize int
	// QueuePayloads bounds the bytes of the committed payloads the queue
	// keeps with its turns (Appended.Payload); past it the projector
	// reads them back from the store (DefaultQueuePayloads when 0).
	QueuePayloads int
	// Batch is the most turns one statement writes (DefaultBatch when 0).
	Batch int
	// Linger is how long a queued turn may wait for a batch to fill
	// (DefaultLinger when 0, none when negative): a few large statements
	// cost Postgres far less per turn than many small ones.
	Linger time.Duration
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Defaults of Options.
const (
	DefaultQueueSize     = 1 << 16
	DefaultQueuePayloads = 32 << 20
	DefaultBatch         = 2048
	DefaultLinger        = 250 * time.Millisecond
)

// catchUpEvery is how often the projector catches up when nothing else
// made it.
const catchUpEvery = time.Minute

// retryAfter is how long the projector waits after Postgres failed it.
const retryAfter = time.Second

// Projector writes turn_data off the append path. Feed it with Appended
// and Published; Run does the work.
type Projector struct {
	src   Source
	pool  *pgxpool.Pool
	q     *analyticsdb.Queries
	opts  Options
	log   *slog.Logger
	queue *queue

	// catchUp says a catch-up is due: at start, after a failure.
	catchUp atomic.Bool
	// lagMu guards the times the lag gauge is computed from.
	lagMu    sync.Mutex
	inFlight time.Time // oldest job being projected; zero when none
	behind   time.Time // oldest unprojected turn catch-up knows of

	backfills *backfillSet

	projected [numOutcomes]atomic.Int64
	caughtUp  atomic.Int64
	failures  atomic.Int64
	// typeIDsLeftOut counts type ids a backfill left out (typeIDs).
	typeIDsLeftOut atomic.Int64
	reproj         atomic.Int64
	delay          histogram
}

// New returns a projector; start it with Run.
func New(opts Options) *Projector {
	if opts.MaxPayload == 0 {
		opts.MaxPayload = DefaultMaxPayload
	}
	if opts.QueueSize == 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.QueuePayloads == 0 {
		opts.QueuePayloads = DefaultQueuePayloads
	}
	if opts.Batch == 0 {
		opts.Batch = DefaultBatch
	}
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Projector{
		src: opts.Source, pool: opts.Pool, q: analyticsdb.New(pgrole.As(opts.Pool, pgrole.Projector, "")), opts: opts,
		log: opts.Logger, queue: newQueue(opts.QueueSize, opts.QueuePayloads), backfills: newBackfillSet(),
	}
	p.catchUp.Store(true)
	return p
}

// Appended queues committed turns. It is (part of) the store's
// Options.OnAppend: it never blocks, and drops what the queue cannot
// hold, for catch-up to find.
func (p *Projector) Appended(turns []store.Appended) {
	now := p.opts.Now()
	jobs := make([]job, len(turns))
	for i, a := range turns {
		jobs[i] = job{
			tenant: a.Tenant, turnID: a.TurnID, typeID: a.TypeID, typeVersion: a.TypeVersion, size: int64(a.UncompressedLen),
			turn: turnFields{contextID: a.ContextID, parentID: a.ParentID, created: a.CreatedAt, keyed: a.Keyed},
			at:   now, payload: a.Payload,
		}
	}
	p.queue.push(jobs)
}

// Published asks for the re-projection of the tenant's turns after a
// bundle was published. It never blocks.
func (p *Projector) Published(t ident.Tenant) {
	p.backfills.add(t)
}

// Run projects until ctx ends: first whatever a crash or an older version
// left unprojected, then the turns Appended queues, catching up again
// after a drop or a failure. Backfills run beside it, on a goroutine Run
// owns and waits for.
func (p *Projector) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { p.runBackfills(ctx) })
	defer wg.Wait()
	retry := time.NewTicker(retryAfter)
	defer retry.Stop()
	var lastCatchUp, lastTry time.Time
	for ctx.Err() == nil {
		// A periodic catch-up also moves the watermarks on, so that the
		// next start scans only the turns since. A failed one is tried
		// again after retryAfter; the queue is drained meanwhile.
		if p.takeDrops() {
			p.catchUp.Store(true)
		}
		due := p.catchUp.Load() || time.Since(lastCatchUp) > catchUpEvery
		if due && time.Since(lastTry) >= retryAfter {
			lastTry = time.Now()
			if p.runCatchUp(ctx) {
				lastCatchUp = lastTry
			}
		}
		if p.drain(ctx) {
			continue
		}
		select {
		case <-ctx.Done():
		case <-p.queue.wake:
		case <-retry.C:
		}
	}
	return nil
}

// gather waits, while the queue holds less than a batch, for up to
// Linger (of real time: the injected clock dates turns, it does not pace
// the projector), or until ctx ends.
func (p *Projector) gather(ctx context.Context) {
	if n, _, _, _ := p.queue.state(); n == 0 || n >= p.opts.Batch || p.opts.Linger < 0 {
		return
	}
	t := time.NewTimer(p.opts.Linger)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-p.queue.wake:
		}
		if n, _, _, _ := p.queue.state(); n >= p.opts.Batch {
			return
		}
	}
}

// takeDrops reports whether the queue dropped turns, and makes them the
// catch-up's.
func (p *Projector) takeDrops() bool {
	since, ok := p.queue.takeDrops()
	if ok {
		p.noteBehind(since)
	}
	return ok
}

// drain projects one batch of the queue; false when it was empty.
func (p *Projector) drain(ctx context.Context) bool {
	p.gather(ctx)
	jobs := p.queue.take(p.opts.Batch)
	if len(jobs) == 0 {
		return false
	}
	p.setInFlight(jobs[0].at)
	defer p.setInFlight(time.Time{})
	if err := p.projectBatch(ctx, jobs); err != nil {
		if ctx.Err() == nil {
			p.log.Warn("analytics: project turns; catch-up retries", "turns", len(jobs), "err", err)
			p.failures.Add(1)
		}
		p.noteBehind(jobs[0].at)
		p.catchUp.Store(true)
		sleep(ctx, retryAfter)
	}
	return true
}

// projectBatch projects jobs and writes them in one statement. When a
// tenant's registry changed meanwhile (a bundle was published while the
// batch was projected), its turns are projected again with the new one,
// so that a backfill that already went past them cannot leave them stale.
func (p *Projector) projectBatch(ctx context.Context, jobs []job) error {
	rows, gens, err := p.projectAll(ctx, jobs)
	if err != nil {
		return err
	}
	if err := p.write(ctx, rows); err != nil {
		return err
	}
	again, err := p.staleJobs(ctx, jobs, gens)
	if err != nil || len(again) == 0 {
		return err
	}
	rows, _, err = p.projectAll(ctx, again)
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].reprojection = true
	}
	return p.write(ctx, rows)
}

// staleJobs returns the jobs whose tenant's registry is no longer the
// generation gens says they were projected with.
func (p *Projector) staleJobs(ctx context.Context, jobs []job, gens map[string]uint64) ([]job, error) {
	changed := map[string]bool{}
	for _, j := range jobs {
		if _, seen := changed[j.tenant.ID]; seen {
			continue
		}
		reg, err := p.src.Registry(ctx, j.tenant)
		if err != nil {
			return nil, fmt.Errorf("registry of tenant %q: %w", j.tenant.ID, err)
		}
		changed[j.tenant.ID] = reg.Generation() != gens[j.tenant.ID]
	}
	var again []job
	for _, j := range jobs {
		if changed[j.tenant.ID] {
			again = append(again, j)
		}
	}
	return again, nil
}

// row is one turn_data row to write.
type row struct {
	job
	Projected
	generation   uint64
	reprojection bool // a backfill's or a stale batch's second projection
}

// projectAll projects jobs, each with its tenant's current registry, and
// returns the rows and the generation used per tenant.
func (p *Projector) projectAll(ctx context.Context, jobs []job) ([]row, map[string]uint64, error) {
	regs := map[string]*registry.Registry{}
	gens := map[string]uint64{}
	rows := make([]row, 0, len(jobs))
	for _, j := range jobs {
		reg, ok := regs[j.tenant.ID]
		if !ok {
			var err error
			if reg, err = p.src.Registry(ctx, j.tenant); err != nil {
				return nil, nil, fmt.Errorf("registry of tenant %q: %w", j.tenant.ID, err)
			}
			regs[j.tenant.ID], gens[j.tenant.ID] = reg, reg.Generation()
		}
		pr, err := p.projectOne(ctx, reg, j)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, row{job: j, Projected: pr, generation: reg.Generation()})
	}
	return rows, gens, nil
}

// projectOne reads a turn's payload and projects it. Only an unavailable
// store is an error; an unreadable blob is a skipped turn.
func (p *Projector) projectOne(ctx context.Context, reg *registry.Registry, j job) (Projected, error) {
	if j.size > p.opts.MaxPayload {
		return Projected{Skipped: SkipTooLarge}, nil
	}
	if _, ok := reg.Descriptor(j.typeID, j.typeVersion); !ok {
		return Projected{Skipped: SkipUnknownType}, nil
	}
	payload, err := j.payload, error(nil)
	if payload == nil {
		payload, err = p.src.TurnPayload(ctx, j.tenant, j.turnID)
	}
	switch {
	case fault.KindOf(err) == fault.Unavailable:
		return Projected{}, fmt.Errorf("payload of turn %d: %w", j.turnID, err)
	case err != nil:
		return Projected{Skipped: SkipUnreadable}, nil
	}
	return Project(reg, j.typeID, j.typeVersion, payload), nil
}

func (p *Projector) setInFlight(t time.Time) {
	p.lagMu.Lock()
	p.inFlight = t
	p.lagMu.Unlock()
}

// noteBehind records that a turn committed at t may be unprojected until
// the next catch-up completes.
func (p *Projector) noteBehind(t time.Time) {
	p.lagMu.Lock()
	if p.behind.IsZero() || t.Before(p.behind) {
		p.behind = t
	}
	p.lagMu.Unlock()
}

// Lag is how long the oldest committed turn the projector knows to be
// unprojected has waited: queued, being projected, dropped or found by
// catch-up. 0 when it is up to date.
func (p *Projector) Lag() time.Duration {
	_, oldest, _, dropSince := p.queue.state()
	p.lagMu.Lock()
	for _, t := range []time.Time{p.inFlight, p.behind, dropSince} {
		if !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	p.lagMu.Unlock()
	if oldest.IsZero() {
		return 0
	}
	return max(p.opts.Now().Sub(oldest), 0)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
