package analytics

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/cxdbcompat/analytics/internal/analyticsdb"
	"github.com/cardboxhq/cardbox/internal/pgerr"
	"github.com/cardboxhq/cardbox/internal/pgrole"
)

// write writes rows, their rollups and their tool calls in one
// transaction (rows may not name a turn twice: the last row of a turn
// wins). Rows of turns projected for the first time are inserted with a
// plain insert, the cheapest write Postgres has; when one of them has a
// row already (catch-up projected it meanwhile), or for re-projections,
// the batch is upserted instead. The rollups are counted here, from the
// rows Postgres reports inserted: a turn counts once, when its row is
// first inserted.
func (p *Projector) write(ctx context.Context, rows []row) error {
	rows = lastPerTurn(rows)
	if len(rows) == 0 {
		return nil
	}
	err := p.inBatchTx(ctx, rows, func(q *analyticsdb.Queries) error {
		if allFirst(rows) {
			return p.insertRows(ctx, q, rows)
		}
		return p.upsertRows(ctx, q, rows)
	})
	if pgerr.UniqueViolation(err) && allFirst(rows) {
		err = p.inBatchTx(ctx, rows, func(q *analyticsdb.Queries) error { return p.upsertRows(ctx, q, rows) })
	}
	if err != nil {
		if pgerr.DataError(err) && len(rows) > 1 {
			return p.writeEach(ctx, rows)
		}
		return fmt.Errorf("write %d turn_data rows: %w", len(rows), err)
	}
	now := p.opts.Now()
	for _, r := range rows {
		p.projected[outcomeOf(r.Skipped)].Add(1)
		if !r.at.IsZero() && !r.reprojection {
			p.delay.observe(max(now.Sub(r.at), 0).Seconds())
		}
	}
	return nil
}

// allFirst reports whether every row is its turn's first projection.
func allFirst(rows []row) bool {
	for _, r := range rows {
		if r.reprojection {
			return false
		}
	}
	return true
}

// inBatchTx runs fn in a transaction that first makes Postgres plan each
// statement for its own arrays (PlanEachBatch) and holds off the deletion
// of the rows' tenants (HoldOffTenantDeletion) and the burial of their
// dead turns (HoldOffBurials).
func (p *Projector) inBatchTx(ctx context.Context, rows []row, fn func(q *analyticsdb.Queries) error) error {
	var nos []int32
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.tenant.ID] {
			seen[r.tenant.ID] = true
			nos = append(nos, int32(r.tenant.No))
		}
	}
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		q := analyticsdb.New(pgrole.As(tx, pgrole.Projector, ""))
		if err := q.PlanEachBatch(ctx); err != nil {
			return fmt.Errorf("plan each batch: %w", err)
		}
		if err := q.HoldOffTenantDeletion(ctx, nos); err != nil {
			return fmt.Errorf("lock tenants: %w", err)
		}
		if err := q.HoldOffBurials(ctx, nos); err != nil {
			return fmt.Errorf("lock the tenants' rollups: %w", err)
		}
		return fn(q)
	})
}

// insertRows inserts rows of turns that have none, and counts them all.
func (p *Projector) insertRows(ctx context.Context, q *analyticsdb.Queries, rows []row) error {
	written, err := q.InsertTurnData(ctx, analyticsdb.InsertTurnDataParams(rowColumns(rows)))
	if err != nil {
		return err
	}
	live := make(map[string]bool, len(written))
	var ro rollups
	for _, w := range written {
		live[w.TenantID] = true
		ro.addDataBytes(w.TenantID, w.DataBytes)
	}
	for _, r := range rows {
		if live[r.tenant.ID] {
			ro.count(r)
		}
	}
	return p.finishBatch(ctx, q, rows, &ro, func(r row) bool { return live[r.tenant.ID] && r.Data != nil })
}

// upsertRows writes rows that may have one already, and counts those
// inserted.
func (p *Projector) upsertRows(ctx context.Context, q *analyticsdb.Queries, rows []row) error {
	written, err := q.UpsertTurnData(ctx, rowColumns(rows))
	if err != nil {
		return err
	}
	type key struct {
		tenant string
		turn   uint64
	}
	done := make(map[key]bool, len(written))
	var ro rollups
	byTurn := make(map[key]row, len(rows))
	for _, r := range rows {
		byTurn[key{r.tenant.ID, r.turnID}] = r
	}
	for _, w := range written {
		k := key{w.TenantID, uint64(w.TurnID)}
		done[k] = true
		ro.addDataBytes(w.TenantID, w.AddedBytes)
		if w.Inserted {
			ro.count(byTurn[k])
		}
	}
	return p.finishBatch(ctx, q, rows, &ro, func(r row) bool { return done[key{r.tenant.ID, r.turnID}] })
}

// finishBatch adds the batch's rollups and writes the tool calls of the
// rows toolRows picks: those written with data (and every rewritten row,
// whose old calls may have to go).
func (p *Projector) finishBatch(ctx context.Context, q *analyticsdb.Queries, rows []row, ro *rollups, toolRows func(row) bool) error {
	if err := q.ApplyRollups(ctx, ro.params()); err != nil {
		return fmt.Errorf("rollups: %w", err)
	}
	var calls analyticsdb.WriteToolCallsParams
	for _, r := range rows {
		if toolRows(r) {
			calls.TenantIds = append(calls.TenantIds, r.tenant.ID)
			calls.TurnIds = append(calls.TurnIds, int64(r.turnID))
		}
	}
	if len(calls.TurnIds) == 0 {
		return nil
	}
	if err := q.WriteToolCalls(ctx, calls); err != nil {
		return fmt.Errorf("tool calls: %w", err)
	}
	return nil
}

// rowColumns lays rows out as the statements' columns.
func rowColumns(rows []row) analyticsdb.UpsertTurnDataParams {
	n := len(rows)
	c := analyticsdb.UpsertTurnDataParams{
		TenantIds: make([]string, n), TurnIds: make([]int64, n), TypeIds: make([]string, n), TypeVersions: make([]int64, n),
		Datas: make([]string, n), Skipped: make([]string, n), Generations: make([]int64, n), ParentTurnIds: make([]int64, n),
	}
	for i, r := range rows {
		c.TenantIds[i], c.TurnIds[i] = r.tenant.ID, int64(r.turnID)
		c.TypeIds[i], c.TypeVersions[i] = r.typeID, int64(r.typeVersion)
		c.Datas[i], c.Skipped[i], c.Generations[i] = string(r.Data), r.Skipped, int64(r.generation)
		c.ParentTurnIds[i] = int64(r.turn.parentID)
	}
	return c
}

// writeEach writes rows one at a time, after Postgres refused a batch for
// its data: a row it refuses alone keeps only metadata (undecodable), so
// that one turn never stops the others.
func (p *Projector) writeEach(ctx context.Context, rows []row) error {
	for _, r := range rows {
		err := p.write(ctx, []row{r})
		if err != nil && pgerr.DataError(err) {
			p.log.Warn("analytics: Postgres refused a turn's data; keeping its metadata only", "tenant", r.tenant.ID, "turn", r.turnID, "err", err)
			r.Projected = Projected{Skipped: SkipUndecodable}
			err = p.write(ctx, []row{r})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// lastPerTurn drops every row that a later row of the same turn replaces.
func lastPerTurn(rows []row) []row {
	type key struct {
		tenant string
		turn   uint64
	}
	last := make(map[key]int, len(rows))
	for i, r := range rows {
		last[key{r.tenant.ID, r.turnID}] = i
	}
	if len(last) == len(rows) {
		return rows
	}
	out := rows[:0:0]
	for i, r := range rows {
		if last[key{r.tenant.ID, r.turnID}] == i {
			out = append(out, r)
		}
	}
	return out
}

// rollups are what a batch adds to the rollup tables: each turn counts
// once, when its turn_data row is first inserted.
type rollups struct {
	daily    map[dailyKey]int64
	contexts map[contextKey]int64
	keyed    map[keyedKey]int64
	usage    map[string]*usage
	parents  map[contextKey]bool // (tenant, parent turn) of the inserted turns
}

type dailyKey struct {
	tenant, typeID string
	day            time.Time
	typeVersion    uint32
}

type contextKey struct {
	tenant string
	id     uint64
}

type keyedKey struct {
	contextKey
	day time.Time
}

type usage struct{ turns, payloadBytes, dataBytes int64 }

func (ro *rollups) tenantUsage(tenant string) *usage {
	if ro.usage == nil {
		ro.usage = map[string]*usage{}
	}
	u := ro.usage[tenant]
	if u == nil {
		u = &usage{}
		ro.usage[tenant] = u
	}
	return u
}

// count adds an inserted row's turn.
func (ro *rollups) count(r row) {
	if ro.daily == nil {
		ro.daily, ro.contexts, ro.keyed, ro.parents = map[dailyKey]int64{}, map[contextKey]int64{}, map[keyedKey]int64{}, map[contextKey]bool{}
	}
	t := r.tenant.ID
	created := r.turn.created.UTC()
	day := time.Date(created.Year(), created.Month(), created.Day(), 0, 0, 0, 0, time.UTC)
	ro.daily[dailyKey{tenant: t, typeID: r.typeID, day: day, typeVersion: r.typeVersion}]++
	ctx := contextKey{t, r.turn.contextID}
	ro.contexts[ctx]++
	if r.turn.keyed {
		ro.keyed[keyedKey{ctx, day}]++
	}
	u := ro.tenantUsage(t)
	u.turns++
	u.payloadBytes += r.size
	if r.turn.parentID != 0 {
		ro.parents[contextKey{t, r.turn.parentID}] = true
	}
}

// addDataBytes adds the bytes of data a tenant's rows added.
func (ro *rollups) addDataBytes(tenant string, n int64) {
	ro.tenantUsage(tenant).dataBytes += n
}

// params lays the rollups out as ApplyRollups' columns, each table's
// rows in key order: two batches (the projector's and a backfill's) lock
// the rows they share in the same order, and never deadlock.
func (ro *rollups) params() analyticsdb.ApplyRollupsParams {
	var a analyticsdb.ApplyRollupsParams
	for _, k := range slices.SortedFunc(maps.Keys(ro.daily), compareDaily) {
		a.DailyTenantIds = append(a.DailyTenantIds, k.tenant)
		a.DailyDays = append(a.DailyDays, pgtype.Date{Time: k.day, Valid: true})
		a.DailyTypeIds = append(a.DailyTypeIds, k.typeID)
		a.DailyTypeVersions = append(a.DailyTypeVersions, int64(k.typeVersion))
		a.DailyTurns = append(a.DailyTurns, ro.daily[k])
	}
	for _, k := range slices.SortedFunc(maps.Keys(ro.contexts), compareContext) {
		a.ContextTenantIds = append(a.ContextTenantIds, k.tenant)
		a.ContextIds = append(a.ContextIds, int64(k.id))
		a.ContextTurns = append(a.ContextTurns, ro.contexts[k])
	}
	for _, k := range slices.SortedFunc(maps.Keys(ro.keyed), compareKeyed) {
		a.KeyedTenantIds = append(a.KeyedTenantIds, k.tenant)
		a.KeyedContextIds = append(a.KeyedContextIds, int64(k.id))
		a.KeyedDays = append(a.KeyedDays, pgtype.Date{Time: k.day, Valid: true})
		a.KeyedAppends = append(a.KeyedAppends, ro.keyed[k])
	}
	for _, t := range slices.Sorted(maps.Keys(ro.usage)) {
		u := ro.usage[t]
		a.UsageTenantIds = append(a.UsageTenantIds, t)
		a.UsageTurns = append(a.UsageTurns, u.turns)
		a.UsagePayloadBytes = append(a.UsagePayloadBytes, u.payloadBytes)
		a.UsageDataBytes = append(a.UsageDataBytes, u.dataBytes)
	}
	for _, k := range slices.SortedFunc(maps.Keys(ro.parents), compareContext) {
		a.ParentTenantIds = append(a.ParentTenantIds, k.tenant)
		a.ParentTurnIds = append(a.ParentTurnIds, int64(k.id))
	}
	return a
}

func compareContext(a, b contextKey) int {
	return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.id, b.id))
}

func compareKeyed(a, b keyedKey) int {
	return cmp.Or(compareContext(a.contextKey, b.contextKey), a.day.Compare(b.day))
}

func compareDaily(a, b dailyKey) int {
	return cmp.Or(cmp.Compare(a.tenant, b.tenant), a.day.Compare(b.day), cmp.Compare(a.typeID, b.typeID),
		cmp.Compare(a.typeVersion, b.typeVersion))
}
