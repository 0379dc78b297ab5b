package analytics

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cxdbcompat/analytics/internal/analyticsdb"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
)

// Progress is how far a backfill went, as Backfill reports it after each
// page.
type Progress struct {
	Tenant     string
	Generation uint64
	Scanned    int64 // rows looked at by this run
	Total      int64 // rows this run had to look at when it started
	// Reprojected counts rows whose projection changed, over every run of
	// this backfill (a resumed one included).
	Reprojected int64
	Done        bool
}

// Backfill re-projects the tenant's turn_data rows that its current
// registry may project differently: rows projected with an older registry
// generation whose type is registered now, or that were skipped as of an
// unknown type. A row whose projection did not change is left as it is.
// Its cursor is stored per tenant and generation after every page, so a
// run that a crash stopped resumes where it was; a finished one is not
// run again. progress, when not nil, is called after each page.
func (p *Projector) Backfill(ctx context.Context, t ident.Tenant, progress func(Progress)) error {
	reg, err := p.src.Registry(ctx, t)
	if err != nil {
		return fmt.Errorf("backfill tenant %q: registry: %w", t.ID, err)
	}
	gen := int64(reg.Generation())
	if gen == 0 {
		report(progress, Progress{Tenant: t.ID, Done: true}) // no bundle: nothing is typed
		return nil
	}
	st, err := p.q.StartBackfill(ctx, analyticsdb.StartBackfillParams{TenantID: t.ID, Generation: gen})
	if err != nil {
		return fmt.Errorf("backfill tenant %q: start: %w", t.ID, err)
	}
	if err := p.q.SupersedeBackfills(ctx, analyticsdb.SupersedeBackfillsParams{TenantID: t.ID, Generation: gen}); err != nil {
		return fmt.Errorf("backfill tenant %q: supersede older: %w", t.ID, err)
	}
	pr := Progress{Tenant: t.ID, Generation: uint64(gen), Reprojected: st.Reprojected, Done: st.Done}
	if st.Done {
		report(progress, pr)
		return nil
	}
	b := &backfill{p: p, t: t, reg: reg, gen: gen, types: p.typeIDs(reg), after: st.AfterTurnID, pr: pr}
	if err := b.run(ctx, progress); err != nil {
		return fmt.Errorf("backfill tenant %q generation %d: %w", t.ID, gen, err)
	}
	return nil
}

func report(progress func(Progress), pr Progress) {
	if progress != nil {
		progress(pr)
	}
}

// backfill is one run of Backfill.
type backfill struct {
	p     *Projector
	t     ident.Tenant
	reg   *registry.Registry
	gen   int64
	types []string
	after int64
	pr    Progress
}

func (b *backfill) run(ctx context.Context, progress func(Progress)) error {
	total, err := b.p.q.BackfillRemaining(ctx, analyticsdb.BackfillRemainingParams{TenantID: b.t.ID, After: b.after, Generation: b.gen, TypeIds: b.types})
	if err != nil {
		return fmt.Errorf("count rows: %w", err)
	}
	b.pr.Total = total
	for !b.pr.Done {
		if err := b.page(ctx); err != nil {
			return err
		}
		report(progress, b.pr)
	}
	return nil
}

// page re-projects the next page of rows and records the cursor.
func (b *backfill) page(ctx context.Context) error {
	rows, err := b.p.q.BackfillPage(ctx, analyticsdb.BackfillPageParams{
		TenantID: b.t.ID, After: b.after, Generation: b.gen, TypeIds: b.types, Max: int32(b.p.opts.Batch),
	})
	if err != nil {
		return fmt.Errorf("read rows after turn %d: %w", b.after, err)
	}
	var changed []row
	for _, r := range rows {
		j := job{
			tenant: b.t, turnID: uint64(r.TurnID), typeID: r.TypeID, typeVersion: uint32(r.TypeVersion), size: r.UncompressedLen,
			turn: turnFields{contextID: uint64(r.ContextID), parentID: uint64(r.ParentTurnID), created: r.CreatedAt, keyed: r.Keyed},
		}
		pr, err := b.p.projectOne(ctx, b.reg, j)
		if err != nil {
			return err
		}
		if !sameProjection(pr, r.Data, r.Skipped) {
			changed = append(changed, row{job: j, Projected: pr, generation: uint64(b.gen), reprojection: true})
		}
	}
	if err := b.p.write(ctx, changed); err != nil {
		return err
	}
	if len(rows) > 0 {
		b.after = rows[len(rows)-1].TurnID
	}
	b.pr.Scanned += int64(len(rows))
	b.pr.Reprojected += int64(len(changed))
	b.pr.Done = len(rows) < b.p.opts.Batch
	b.p.reproj.Add(int64(len(changed)))
	err = b.p.q.AdvanceBackfill(ctx, analyticsdb.AdvanceBackfillParams{
		TenantID: b.t.ID, Generation: b.gen, AfterTurnID: b.after, Reprojected: int64(len(changed)), Done: b.pr.Done,
	})
	if err != nil {
		return fmt.Errorf("record cursor %d: %w", b.after, err)
	}
	return nil
}

// typeIDs lists the registry's types.
// typeIDs are the registry's type ids that Postgres can store. One it
// cannot (a NUL, invalid UTF-8: published before the HTTP API refused
// them) names no stored turn, since the turn store refuses such ids too;
// sent along, it would fail every run of the backfill. It is left out
// and counted.
func (p *Projector) typeIDs(reg *registry.Registry) []string {
	types := reg.Types()
	out := make([]string, 0, len(types))
	for _, t := range types {
		if strings.IndexByte(t.TypeID, 0) >= 0 || !utf8.ValidString(t.TypeID) {
			p.typeIDsLeftOut.Add(1)
			continue
		}
		out = append(out, t.TypeID)
	}
	return out
}

// sameProjection compares a new projection with a stored row (jsonb text,
// which Postgres normalised: keys reordered, spaces added).
func sameProjection(pr Projected, data, skipped string) bool {
	if pr.Skipped != "" || skipped != "" {
		return pr.Skipped == skipped
	}
	var a, b any
	if decode(pr.Data, &a) != nil || decode([]byte(data), &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

func decode(data []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return d.Decode(v)
}

// backfillSet holds the tenants waiting for a backfill; adding one twice
// before it runs runs it once.
type backfillSet struct {
	mu      sync.Mutex
	tenants map[string]ident.Tenant
	wake    chan struct{}
}

func newBackfillSet() *backfillSet {
	return &backfillSet{tenants: map[string]ident.Tenant{}, wake: make(chan struct{}, 1)}
}

func (s *backfillSet) add(t ident.Tenant) {
	s.mu.Lock()
	s.tenants[t.ID] = t
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *backfillSet) takeAll() []ident.Tenant {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ident.Tenant, 0, len(s.tenants))
	for _, t := range s.tenants {
		out = append(out, t)
	}
	clear(s.tenants)
	return out
}

// runBackfills runs the backfills Published asks for, and at start those
// a crash interrupted, until ctx ends. A failed one is tried again.
func (p *Projector) runBackfills(ctx context.Context) {
	for ctx.Err() == nil {
		err := p.resumeBackfills(ctx)
		if err == nil {
			break
		}
		if ctx.Err() == nil {
			p.log.Warn("analytics: resume backfills; retrying", "err", err)
		}
		sleep(ctx, retryAfter)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.backfills.wake:
		}
		for _, t := range p.backfills.takeAll() {
			if err := p.Backfill(ctx, t, nil); err != nil {
				if ctx.Err() != nil {
					return
				}
				p.log.Warn("analytics: backfill; retrying", "tenant", t.ID, "err", err)
				p.failures.Add(1)
				sleep(ctx, retryAfter)
				p.backfills.add(t)
			}
		}
	}
}

// resumeBackfills queues the tenants whose backfill did not finish.
func (p *Projector) resumeBackfills(ctx context.Context) error {
	pending, err := p.q.PendingBackfills(ctx)
	if err != nil {
		return fmt.Errorf("list pending backfills: %w", err)
	}
	for _, b := range pending {
		t, err := p.src.Tenant(ctx, b.TenantID)
		if err != nil {
			return fmt.Errorf("tenant %q: %w", b.TenantID, err)
		}
		p.backfills.add(t)
	}
	return nil
}

// RunningBackfill is a backfill not finished yet, as far as its stored
// cursor says.
type RunningBackfill struct {
	Tenant      string
	Generation  uint64
	AfterTurnID uint64 // the turn its next page starts after
	// Reprojected counts rows whose projection changed so far.
	Reprojected int64
}

// RunningBackfills returns the backfills not finished yet in pool's
// database, by tenant and generation, whoever runs them: how the CLI
// follows those of a running server.
func RunningBackfills(ctx context.Context, pool *pgxpool.Pool) ([]RunningBackfill, error) {
	rows, err := analyticsdb.New(pgrole.As(pool, pgrole.Projector, "")).RunningBackfills(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the running backfills: %w", err)
	}
	running := make([]RunningBackfill, len(rows))
	for i, r := range rows {
		running[i] = RunningBackfill{
			Tenant:      r.TenantID,
			Generation:  uint64(r.Generation),
			AfterTurnID: uint64(r.AfterTurnID),
			Reprojected: r.Reprojected,
		}
	}
	return running, nil
}
