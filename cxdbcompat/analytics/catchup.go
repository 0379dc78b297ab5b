package analytics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/analytics/internal/analyticsdb"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// runCatchUp projects every committed turn without a turn_data row, tenant
// by tenant, from each tenant's watermark, and reports whether it
// finished. On failure it leaves the catch-up due, for the next round.
func (p *Projector) runCatchUp(ctx context.Context) bool {
	p.catchUp.Store(false)
	if err := p.CatchUp(ctx); err != nil {
		if ctx.Err() == nil {
			p.log.Warn("analytics: catch-up; retrying", "err", err)
			p.failures.Add(1)
		}
		p.catchUp.Store(true)
		return false
	}
	p.lagMu.Lock()
	p.behind = time.Time{}
	p.lagMu.Unlock()
	return true
}

// CatchUp projects every committed turn that has no turn_data row, in
// turn id order from each tenant's durable watermark, and moves the
// watermarks on. It is what makes a crash (or a dropped queue) harmless.
func (p *Projector) CatchUp(ctx context.Context) error {
	tenants, err := p.q.ProjectorTenants(ctx)
	if err != nil {
		return fmt.Errorf("list tenants: %w", err)
	}
	// One tenant's failure does not hold the others back.
	var errs []error
	for _, tr := range tenants {
		if err := p.catchUpTenant(ctx, tr); err != nil {
			errs = append(errs, fmt.Errorf("tenant %q: %w", tr.TenantID, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// catchUpTenant pages through the tenant's turns after its watermark.
func (p *Projector) catchUpTenant(ctx context.Context, tr analyticsdb.ProjectorTenantsRow) error {
	t, err := p.src.Tenant(ctx, tr.TenantID)
	if err != nil {
		return err
	}
	after := tr.Watermark
	for {
		page, err := p.q.ScanTurnsAfter(ctx, analyticsdb.ScanTurnsAfterParams{TenantID: t.ID, After: after, Max: int32(p.opts.Batch)})
		if err != nil {
			return fmt.Errorf("scan turns after %d: %w", after, err)
		}
		if len(page) == 0 {
			return nil
		}
		if err := p.catchUpPage(ctx, t, page); err != nil {
			return err
		}
		after = page[len(page)-1].TurnID
		if err := p.q.SetWatermark(ctx, analyticsdb.SetWatermarkParams{TenantID: t.ID, TurnID: after}); err != nil {
			return fmt.Errorf("set watermark: %w", err)
		}
		if len(page) < p.opts.Batch {
			return nil
		}
	}
}

// catchUpPage projects the turns of page that have no row yet.
func (p *Projector) catchUpPage(ctx context.Context, t ident.Tenant, page []analyticsdb.ScanTurnsAfterRow) error {
	var jobs []job
	for _, r := range page {
		if !r.Projected {
			jobs = append(jobs, job{
				tenant: t, turnID: uint64(r.TurnID), typeID: r.TypeID, typeVersion: uint32(r.TypeVersion),
				size: r.UncompressedLen, at: r.CreatedAt,
				turn: turnFields{contextID: uint64(r.ContextID), parentID: uint64(r.ParentTurnID), created: r.CreatedAt, keyed: r.Keyed},
			})
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	p.noteBehind(jobs[0].at)
	p.caughtUp.Add(int64(len(jobs)))
	return p.projectBatch(ctx, jobs)
}

// Tenants lists every tenant's id.
func (p *Projector) Tenants(ctx context.Context) ([]string, error) {
	rows, err := p.q.ProjectorTenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.TenantID
	}
	return out, nil
}
