package store

import (
	"math"
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/sqlc/db"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/idemindex"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// plannedTurn is a new turn of the group being committed.
type plannedTurn struct {
	job       *job
	id        uint64
	contextID uint64
	meta      turnMeta
}

func (t *plannedTurn) tenantID(e *Engine) string { return e.tenants.idOf(t.meta.tenant) }

// newType is a type ref the group introduces.
type newType struct {
	tenant uint32
	ref    uint32
	typeID string
}

// grant records that a tenant stores bytes another tenant stored first.
type grant struct {
	tenant uint32
	hash   ident.Hash
}

// plan is one group resolved against memory: ids and depths assigned, the
// bytes to write and the rows to commit. Jobs that fail validation are
// answered while planning; replays are answered with the group.
type plan struct {
	jobs     []*job
	outcomes map[*job]outcome // decided while planning (errors, replays)
	follows  map[*job]int     // replays of a key first used in this group: index into turns

	puts       []blobpack.PutItem
	putOwners  map[ident.Hash]uint32 // first owner of each blob put by this group
	putJobs    map[*job]int          // blob puts: index into puts
	putResults []blobpack.Result

	turns    []plannedTurn
	records  []turnlog.Record
	logStart int64
	packEnd  int64 // the blob pack's size once the group's blobs are written
	maxTurn  uint64

	heads    map[uint64]contextState
	pending  map[uint64]turnMeta // turns of this group, by id, for parents
	newTypes []newType
	typeRefs map[typeKey]uint32
	keys     map[idemindex.Key]int // new idempotency keys: index into turns
	grants   map[grant]struct{}

	now   time.Time // when it was planned: its turns' created_at
	seq   uint64    // position in the pipeline
	epoch uint64    // the rollback epoch it was planned in
	tx    *groupTx  // open transaction with the group's statement; nil without turns
	// deadline is when the group's statement and COMMIT must have been
	// answered: the earliest deadline of its appends.
	deadline time.Time
}

func (c *committer) plan(batch []*job, now time.Time) *plan {
	n := len(batch) // sizes the group's slices and maps once
	p := &plan{
		now: now, jobs: batch, outcomes: map[*job]outcome{}, follows: map[*job]int{}, putJobs: map[*job]int{},
		heads: make(map[uint64]contextState, n), pending: make(map[uint64]turnMeta, n), typeRefs: map[typeKey]uint32{},
		keys: map[idemindex.Key]int{}, grants: map[grant]struct{}{}, putOwners: make(map[ident.Hash]uint32, n),
		puts: make([]blobpack.PutItem, 0, n), turns: make([]plannedTurn, 0, n), records: make([]turnlog.Record, 0, n),
	}
	for _, j := range batch {
		if j.app == nil {
			p.putJobs[j] = len(p.puts)
			p.queueBlob(j)
			continue
		}
		if err := c.planAppend(p, j, now); err != nil {
			p.outcomes[j] = outcome{err: err}
		}
	}
	return p
}

// planAppend resolves one append against memory and the group so far.
func (c *committer) planAppend(p *plan, j *job, now time.Time) error {
	req, t := j.app, j.tenant
	state, err := p.context(c, t, req.ContextID)
	if err != nil {
		return err
	}
	if len(req.IdempotencyKey) > 0 {
		if c.replay(p, j, now) {
			return nil
		}
	}
	if req.IfHead && req.ParentTurnID != state.head {
		return headMoved(req.ContextID, req.ParentTurnID, state)
	}
	parent, depth, err := p.parent(c, t, req.ParentTurnID, state)
	if err != nil {
		return err
	}
	id := c.nextTurn
	c.nextTurn++
	meta := turnMeta{
		parent: parent, hash: req.ContentHash, depth: depth, tenant: t.No,
		typeRef: p.typeRef(c, t.No, req.TypeID), typeVersion: req.TypeVersion,
		encoding: req.Encoding, compression: req.Compression, uncompressedLen: req.UncompressedLen,
	}
	p.addBlob(c.e, j)
	p.addTurn(j, id, meta, now)
	if len(req.IdempotencyKey) > 0 {
		p.keys[idemindex.NewKey(t.No, req.ContextID, req.IdempotencyKey)] = len(p.turns) - 1
	}
	return nil
}

// replay answers j from its idempotency key if the key is known: from a
// published turn, a group in flight, or earlier in this group. The answer
// goes out when j's group commits, which is after the original's.
func (c *committer) replay(p *plan, j *job, now time.Time) bool {
	k := idemindex.NewKey(j.tenant.No, j.app.ContextID, j.app.IdempotencyKey)
	if i, ok := p.keys[k]; ok {
		first := p.turns[i]
		if err := checkRepeat(j.app, requestOf(first.job.app), first.id); err != nil {
			p.outcomes[j] = outcome{err: err}
		} else {
			p.follows[j] = i
		}
		return true
	}
	e, ok := c.idem.Lookup(k, now)
	if !ok {
		return false
	}
	m, ok := c.e.table.get(e.Turn)
	if !ok {
		m, ok = c.shadow.turns[e.Turn]
	}
	if !ok {
		return false
	}
	orig := keyedRequest{
		hash: m.hash, typeID: c.typeName(m.tenant, m.typeRef), typeVersion: m.typeVersion,
		parent: e.Parent, parentKnown: e.ParentKnown,
	}
	if err := checkRepeat(j.app, orig, e.Turn); err != nil {
		p.outcomes[j] = outcome{err: err}
		return true
	}
	p.outcomes[j] = outcome{res: AppendResult{
		ContextID: j.app.ContextID, TurnID: e.Turn, ParentID: m.parent, Depth: m.depth, ContentHash: m.hash, Replayed: true,
	}}
	return true
}

// context returns the tenant's context as this group, or a group in
// flight, has left it.
func (p *plan) context(c *committer, t ident.Tenant, id uint64) (contextState, error) {
	if s, ok := p.heads[id]; ok && s.tenant == t.No {
		return s, nil
	}
	if h, ok := c.shadow.heads[id]; ok && h.state.tenant == t.No {
		return h.state, nil
	}
	return c.e.contextOf(t, id)
}

// parent resolves the parent turn and the new depth: an explicit parent
// (committed or earlier in the group) or the context's head.
func (p *plan) parent(c *committer, t ident.Tenant, parentID uint64, state contextState) (uint64, uint32, error) {
	if parentID == 0 {
		parentID = state.head
		if parentID == 0 {
			return 0, 1, nil
		}
		return parentID, state.depth + 1, nil
	}
	m, ok := p.pending[parentID]
	if !ok {
		m, ok = c.shadow.turns[parentID]
	}
	if !ok {
		m, ok = c.e.turnOf(t, parentID)
	}
	if !ok || m.tenant != t.No {
		return 0, 0, fault.New(fault.NotFound, "parent turn %d not found", parentID)
	}
	if m.depth == math.MaxUint32 {
		return 0, 0, fault.New(fault.Unprocessable, "parent turn %d is at the maximum depth", parentID)
	}
	return parentID, m.depth + 1, nil
}

// typeRef interns typeID for the tenant, allocating a new ref if needed.
func (p *plan) typeRef(c *committer, tenant uint32, typeID string) uint32 {
	if r, ok := c.e.types.ref(tenant, typeID); ok {
		return r
	}
	k := typeKey{tenant, typeID}
	if r, ok := p.typeRefs[k]; ok {
		return r
	}
	if st, ok := c.shadow.types[k]; ok {
		return st.ref
	}
	r := max(c.e.types.next(tenant), c.shadow.nextTypeRef(tenant))
	for _, nt := range p.newTypes {
		if nt.tenant == tenant && nt.ref >= r {
			r = nt.ref + 1
		}
	}
	p.typeRefs[k] = r
	p.newTypes = append(p.newTypes, newType{tenant: tenant, ref: r, typeID: typeID})
	return r
}

// typeName returns the type id of a ref that is published or introduced
// by a group in flight.
func (c *committer) typeName(tenant, ref uint32) string {
	if name := c.e.types.name(tenant, ref); name != "" {
		return name
	}
	for k, st := range c.shadow.types {
		if k.tenant == tenant && st.ref == ref {
			return k.typeID
		}
	}
	return ""
}

// addBlob queues the payload for the pack unless it is stored, and grants
// it to the tenant when another tenant stored it first.
func (p *plan) addBlob(e *Engine, j *job) {
	if entry, ok := e.blobs.Lookup(j.hash); ok {
		if entry.Owner != j.tenant.No {
			p.grants[grant{j.tenant.No, j.hash}] = struct{}{}
		}
		return
	}
	p.queueBlob(j)
}

// queueBlob adds j's bytes to the group's pack write. The pack stores one
// copy per hash; a second tenant appending the same bytes in the group gets
// a grant (a blob put's caller grants after the fact, see PutBlob).
func (p *plan) queueBlob(j *job) {
	if owner, ok := p.putOwners[j.hash]; ok && owner != j.tenant.No && j.app != nil {
		p.grants[grant{j.tenant.No, j.hash}] = struct{}{}
	} else if !ok {
		p.putOwners[j.hash] = j.tenant.No
	}
	p.puts = append(p.puts, blobpack.PutItem{Hash: j.hash, Data: j.raw, Owner: j.tenant.No, Stored: j.stored, Codec: j.codec})
}

func (p *plan) addTurn(j *job, id uint64, meta turnMeta, now time.Time) {
	req := j.app
	p.turns = append(p.turns, plannedTurn{job: j, id: id, contextID: req.ContextID, meta: meta})
	p.pending[id] = meta
	p.heads[req.ContextID] = contextState{tenant: meta.tenant, head: id, depth: meta.depth, updated: now.UnixMilli()}
	p.maxTurn = id
	var flags uint32
	if req.FSRoot != nil {
		flags |= turnlog.FlagFSRoot
	}
	p.records = append(p.records, turnlog.Record{
		TurnID: id, ParentTurnID: meta.parent, ContextID: req.ContextID, Depth: meta.depth,
		Tenant: meta.tenant, TypeRef: meta.typeRef, TypeVersion: meta.typeVersion,
		Encoding: meta.encoding, Compression: meta.compression, UncompressedLen: meta.uncompressedLen,
		Flags: flags, CreatedAtUnixMs: uint64(now.UnixMilli()), PayloadHash: meta.hash,
	})
}

// pruneEvery is how often (in groups) a group deletes old turn_log_commits
// rows.
const pruneEvery = 1024

// committedEnd is the turn log's end after the group's records.
func (p *plan) committedEnd() int64 {
	return p.logStart + int64(len(p.records))*turnlog.RecordSize
}

// params builds the group's one Postgres statement.
func (p *plan) params(e *Engine, nextTurn uint64) db.CommitAppendBatchParams {
	now := p.now
	a := db.CommitAppendBatchParams{
		StoreID:      e.storeID,
		CommittedEnd: p.committedEnd(),
		NextTurnID:   int64(nextTurn),
		PackEnd:      p.packEnd,
	}
	if p.seq%pruneEvery == 0 {
		a.PruneBelow = p.logStart // commit rows of earlier groups are no longer needed
	}
	n := len(p.turns) // each turn column is sized once
	a.TenantIds, a.TurnTypeIds = make([]string, 0, n), make([]string, 0, n)
	a.TurnIds, a.ContextIds, a.ParentTurnIds, a.Depths = make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	a.TypeVersions, a.Encodings, a.Compressions, a.UncompressedLens = make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	a.PayloadHashes, a.FsRootHashes, a.IdempotencyKeys = make([][]byte, 0, n), make([][]byte, 0, n), make([][]byte, 0, n)
	a.CreatedAts = make([]time.Time, 0, n)
	for _, t := range p.turns {
		p.appendTurnRow(&a, e, t, now)
	}
	for _, nt := range p.newTypes {
		a.TypeTenantIds = append(a.TypeTenantIds, e.tenants.idOf(nt.tenant))
		a.TypeRefs = append(a.TypeRefs, int32(nt.ref))
		a.TypeIds = append(a.TypeIds, nt.typeID)
	}
	for id, s := range p.heads {
		a.HeadTenantIds = append(a.HeadTenantIds, e.tenants.idOf(s.tenant))
		a.HeadContextIds = append(a.HeadContextIds, int64(id))
		a.HeadTurnIds = append(a.HeadTurnIds, int64(s.head))
		a.HeadDepths = append(a.HeadDepths, int64(s.depth))
	}
	for _, i := range p.keys {
		a.KeyTenantIds = append(a.KeyTenantIds, e.tenants.idOf(p.turns[i].meta.tenant))
		a.KeyContextIds = append(a.KeyContextIds, int64(p.turns[i].job.app.ContextID))
		a.KeyValues = append(a.KeyValues, p.turns[i].job.app.IdempotencyKey)
		a.KeyTurnIds = append(a.KeyTurnIds, int64(p.turns[i].id))
		a.KeyCreatedAts = append(a.KeyCreatedAts, now)
		a.KeyRequestedParents = append(a.KeyRequestedParents, int64(p.turns[i].job.app.ParentTurnID))
	}
	for g := range p.grants {
		a.GrantTenantIds = append(a.GrantTenantIds, e.tenants.idOf(g.tenant))
		a.GrantHashes = append(a.GrantHashes, g.hash[:])
	}
	return a
}

func (p *plan) appendTurnRow(a *db.CommitAppendBatchParams, e *Engine, t plannedTurn, now time.Time) {
	req, tenant := t.job.app, e.tenants.idOf(t.meta.tenant)
	var fsRoot, key []byte
	if req.FSRoot != nil {
		fsRoot = req.FSRoot[:]
		a.FsTenantIds = append(a.FsTenantIds, tenant)
		a.FsTurnIds = append(a.FsTurnIds, int64(t.id))
		a.FsHashes = append(a.FsHashes, fsRoot)
	}
	if len(req.IdempotencyKey) > 0 {
		key = req.IdempotencyKey
	}
	a.TenantIds = append(a.TenantIds, tenant)
	a.TurnIds = append(a.TurnIds, int64(t.id))
	a.ContextIds = append(a.ContextIds, int64(t.contextID))
	a.ParentTurnIds = append(a.ParentTurnIds, int64(t.meta.parent))
	a.Depths = append(a.Depths, int64(t.meta.depth))
	a.TurnTypeIds = append(a.TurnTypeIds, req.TypeID)
	a.TypeVersions = append(a.TypeVersions, int64(t.meta.typeVersion))
	a.Encodings = append(a.Encodings, int64(t.meta.encoding))
	a.Compressions = append(a.Compressions, int64(t.meta.compression))
	a.UncompressedLens = append(a.UncompressedLens, int64(t.meta.uncompressedLen))
	a.PayloadHashes = append(a.PayloadHashes, t.meta.hash[:])
	a.FsRootHashes = append(a.FsRootHashes, fsRoot)
	a.IdempotencyKeys = append(a.IdempotencyKeys, key)
	a.CreatedAts = append(a.CreatedAts, now)
}

// answer sends every job its outcome after the group committed.
func (p *plan) answer() {
	results := make(map[*job]AppendResult, len(p.turns))
	for _, t := range p.turns {
		results[t.job] = AppendResult{ContextID: t.contextID, TurnID: t.id, ParentID: t.meta.parent, Depth: t.meta.depth, ContentHash: t.meta.hash}
	}
	for _, j := range p.jobs {
		j.done <- p.outcomeOf(j, results)
	}
}

func (p *plan) outcomeOf(j *job, results map[*job]AppendResult) outcome {
	if o, ok := p.outcomes[j]; ok {
		return o
	}
	if i, ok := p.follows[j]; ok {
		r := results[p.turns[i].job]
		r.ContextID, r.Replayed = j.app.ContextID, true
		return outcome{res: r}
	}
	if i, ok := p.putJobs[j]; ok {
		r := p.putResults[i]
		return outcome{entry: r.Entry, isNew: r.New}
	}
	return outcome{res: results[j]}
}

// failPending answers err to every job of a group that did not commit,
// except those that failed their own validation. Replays fail too: their
// original may be in a group that failed as well.
func (p *plan) failPending(err error) {
	for _, j := range p.jobs {
		if o, ok := p.outcomes[j]; ok && o.err != nil {
			j.done <- o
			continue
		}
		j.done <- outcome{err: err}
	}
}
