package groupcommit

import (
	"math"
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/idemindex"
	"github.com/cardboxhq/cardbox/store/internal/dedupfence"
	"github.com/cardboxhq/cardbox/store/internal/memindex"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/internal/storetype"
	"github.com/cardboxhq/cardbox/store/internal/usage"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// plannedTurn is a new turn of the group being committed.
type plannedTurn struct {
	job       *Job
	id        uint64
	contextID uint64
	meta      memindex.TurnMeta
	// jump: its parent was not its context's head (memindex.AddJump).
	jump bool
}

// newType is a type ref the group introduces.
type newType struct {
	tenant uint32
	ref    uint32
	typeID string
}

// plan is one group resolved against memory: ids and depths assigned, the
// bytes to write and the rows to commit. Jobs that fail validation are
// answered while planning; replays are answered with the group.
type plan struct {
	jobs     []*Job
	outcomes map[*Job]Outcome // decided while planning (errors, replays)
	follows  map[*Job]int     // replays of a key first used in this group: index into turns

	puts       []blobpack.PutItem
	putOwners  map[ident.Hash]uint32 // first owner of each blob put by this group
	putJobs    map[*Job]int          // blob puts: index into puts
	putResults []blobpack.Result

	turns    []plannedTurn
	records  []turnlog.Record
	logStart int64
	packEnd  int64 // the blob pack's size once the group's blobs are written
	maxTurn  uint64

	heads    map[uint64]memindex.ContextState
	pending  map[uint64]memindex.TurnMeta // turns of this group, by id, for parents
	newTypes []newType
	typeRefs map[memindex.TypeKey]uint32
	keys     map[idemindex.Key]int // new idempotency keys: index into turns
	grants   map[usage.Grant]struct{}

	now   time.Time // when it was planned: its turns' created_at
	seq   uint64    // position in the pipeline
	epoch uint64    // the rollback epoch it was planned in
	tx    *groupTx  // open transaction with the group's statement; nil without turns
	// dedup counts the group as a deduplication in flight until it is
	// settled: committed, failed, or its outcome found out (Config.Dedup).
	dedup dedupfence.Ticket
	// deadline is when the group's statement and COMMIT must have been
	// answered: the earliest deadline of its appends.
	deadline time.Time
}

func (c *Committer) plan(batch []*Job, now time.Time) *plan {
	n := len(batch) // sizes the group's slices and maps once
	p := &plan{
		now: now, jobs: batch, outcomes: map[*Job]Outcome{}, follows: map[*Job]int{}, putJobs: map[*Job]int{},
		heads: make(map[uint64]memindex.ContextState, n), pending: make(map[uint64]memindex.TurnMeta, n), typeRefs: map[memindex.TypeKey]uint32{},
		keys: map[idemindex.Key]int{}, grants: map[usage.Grant]struct{}{}, putOwners: make(map[ident.Hash]uint32, n),
		puts: make([]blobpack.PutItem, 0, n), turns: make([]plannedTurn, 0, n), records: make([]turnlog.Record, 0, n),
	}
	for _, j := range batch {
		if j.Request == nil {
			p.putJobs[j] = len(p.puts)
			p.queueBlob(j)
			continue
		}
		if err := c.planAppend(p, j, now); err != nil {
			p.outcomes[j] = Outcome{Err: err}
		}
	}
	return p
}

// planAppend resolves one append against memory and the group so far.
func (c *Committer) planAppend(p *plan, j *Job, now time.Time) error {
	req, t := j.Request, j.Tenant
	state, err := p.context(c, t, req.ContextID)
	if err != nil {
		return err
	}
	var key idemindex.Key
	if len(req.IdempotencyKey) > 0 {
		key = j.idemKey()
		if c.replay(p, j, key, now) {
			return nil
		}
	}
	if req.IfHead && req.ParentTurnID != state.Head {
		return headMoved(req.ContextID, req.ParentTurnID, state)
	}
	parent, depth, err := p.parent(c, t, req.ParentTurnID, state)
	if err != nil {
		return err
	}
	id := c.nextTurn
	c.nextTurn++
	meta := memindex.TurnMeta{
		Parent: parent, Hash: req.ContentHash, Depth: depth, Tenant: t.No,
		TypeRef: p.typeRef(c, t.No, req.TypeID), TypeVersion: req.TypeVersion,
		Encoding: req.Encoding, Compression: req.Compression, UncompressedLen: req.UncompressedLen,
	}
	p.addBlob(c.cfg.Blobs, c.cfg.Usage, j)
	p.addTurn(j, id, meta, parent != 0 && parent != state.Head, now)
	if len(req.IdempotencyKey) > 0 {
		p.keys[key] = len(p.turns) - 1
	}
	return nil
}

// replay answers j from its idempotency key if the key is known: from a
// published turn, a group in flight, or earlier in this group. The answer
// goes out when j's group commits, which is after the original's.
func (c *Committer) replay(p *plan, j *Job, k idemindex.Key, now time.Time) bool {
	if i, ok := p.keys[k]; ok {
		first := p.turns[i]
		if err := CheckRepeat(j.Request, requestOf(first.job.Request), first.id); err != nil {
			p.outcomes[j] = Outcome{Err: err}
		} else {
			p.follows[j] = i
		}
		return true
	}
	e, ok := c.idem.Lookup(k, now)
	if !ok && c.idem.Stale(j.IdemMark) {
		// More keys than the ring's slack came since the append checked
		// whether memory may miss its key: one held then may be gone.
		// Rare (a long wait in the queue); the append was not made, so
		// a retry with the key is safe, and asks Postgres.
		p.outcomes[j] = Outcome{Err: fault.New(fault.Unavailable, "idempotency key checked too long ago: retry")}
		return true
	}
	if !ok {
		return false
	}
	m, ok := c.cfg.Index.Turns.Get(e.Turn)
	if !ok {
		m, ok = c.shadow.turns[e.Turn]
	}
	if !ok {
		return false
	}
	orig := KeyedRequest{
		Hash: m.Hash, TypeID: c.typeName(m.Tenant, m.TypeRef), TypeVersion: m.TypeVersion,
		Parent: e.Parent, ParentKnown: e.ParentKnown,
	}
	if err := CheckRepeat(j.Request, orig, e.Turn); err != nil {
		p.outcomes[j] = Outcome{Err: err}
		return true
	}
	p.outcomes[j] = Outcome{Result: storetype.AppendResult{
		ContextID: j.Request.ContextID, TurnID: e.Turn, ParentID: m.Parent, Depth: m.Depth, ContentHash: m.Hash, Replayed: true,
	}}
	return true
}

// context returns the tenant's context as this group, or a group in
// flight, has left it.
func (p *plan) context(c *Committer, t ident.Tenant, id uint64) (memindex.ContextState, error) {
	if s, ok := p.heads[id]; ok && s.Tenant == t.No {
		return s, nil
	}
	if h, ok := c.shadow.heads[id]; ok && h.state.Tenant == t.No {
		return h.state, nil
	}
	return c.cfg.Index.Context(t, id)
}

// parent resolves the parent turn and the new depth: an explicit parent
// (committed or earlier in the group) or the context's head.
func (p *plan) parent(c *Committer, t ident.Tenant, parentID uint64, state memindex.ContextState) (uint64, uint32, error) {
	if parentID == 0 {
		parentID = state.Head
		if parentID == 0 {
			return 0, 1, nil
		}
		return parentID, state.Depth + 1, nil
	}
	m, ok := p.pending[parentID]
	if !ok {
		m, ok = c.shadow.turns[parentID]
	}
	if !ok {
		m, ok = c.cfg.Index.Turn(t, parentID)
	}
	if !ok || m.Tenant != t.No {
		return 0, 0, fault.New(fault.NotFound, "parent turn %d not found", parentID)
	}
	if m.Depth == math.MaxUint32 {
		return 0, 0, fault.New(fault.Unprocessable, "parent turn %d is at the maximum depth", parentID)
	}
	return parentID, m.Depth + 1, nil
}

// typeRef interns typeID for the tenant, allocating a new ref if needed.
func (p *plan) typeRef(c *Committer, tenant uint32, typeID string) uint32 {
	if r, ok := c.cfg.Index.Types.Ref(tenant, typeID); ok {
		return r
	}
	k := memindex.TypeKey{Tenant: tenant, TypeID: typeID}
	if r, ok := p.typeRefs[k]; ok {
		return r
	}
	if st, ok := c.shadow.types[k]; ok {
		return st.ref
	}
	r := max(c.cfg.Index.Types.Next(tenant), c.shadow.nextTypeRef(tenant))
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
func (c *Committer) typeName(tenant, ref uint32) string {
	if name := c.cfg.Index.Types.Name(tenant, ref); name != "" {
		return name
	}
	for k, st := range c.shadow.types {
		if k.Tenant == tenant && st.ref == ref {
			return k.TypeID
		}
	}
	return ""
}

// addBlob queues the payload for the pack unless it is stored, and grants
// it to the tenant when another tenant stored it first, or when the tenant
// did but released its claim since (the append claims it again).
func (p *plan) addBlob(blobs *blobpack.Pack, ledger *usage.Ledger, j *Job) {
	if entry, ok := blobs.Lookup(j.Hash); ok {
		g := usage.Grant{Tenant: j.Tenant.No, Hash: j.Hash}
		if entry.Owner != j.Tenant.No || ledger.Released(g) {
			p.grants[g] = struct{}{}
		}
		return
	}
	p.queueBlob(j)
}

// queueBlob adds j's bytes to the group's pack write. The pack stores one
// copy per hash; a second tenant appending the same bytes in the group gets
// a grant (a blob put's caller grants after the fact, see
// store.Engine.PutBlob).
func (p *plan) queueBlob(j *Job) {
	if owner, ok := p.putOwners[j.Hash]; ok && owner != j.Tenant.No && j.Request != nil {
		p.grants[usage.Grant{Tenant: j.Tenant.No, Hash: j.Hash}] = struct{}{}
	} else if !ok {
		p.putOwners[j.Hash] = j.Tenant.No
	}
	p.puts = append(p.puts, blobpack.PutItem{Hash: j.Hash, Data: j.Raw, Owner: j.Tenant.No, Stored: j.Stored, Codec: j.Codec})
}

func (p *plan) addTurn(j *Job, id uint64, meta memindex.TurnMeta, jump bool, now time.Time) {
	req := j.Request
	p.turns = append(p.turns, plannedTurn{job: j, id: id, contextID: req.ContextID, meta: meta, jump: jump})
	p.pending[id] = meta
	p.heads[req.ContextID] = memindex.ContextState{Tenant: meta.Tenant, Head: id, Depth: meta.Depth, Updated: now.UnixMilli()}
	p.maxTurn = id
	var flags uint32
	if req.FSRoot != nil {
		flags |= turnlog.FlagFSRoot
	}
	p.records = append(p.records, turnlog.Record{
		TurnID: id, ParentTurnID: meta.Parent, ContextID: req.ContextID, Depth: meta.Depth,
		Tenant: meta.Tenant, TypeRef: meta.TypeRef, TypeVersion: meta.TypeVersion,
		Encoding: meta.Encoding, Compression: meta.Compression, UncompressedLen: meta.UncompressedLen,
		Flags: flags, CreatedAtUnixMs: uint64(now.UnixMilli()), PayloadHash: meta.Hash,
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
func (p *plan) params(c *Committer) storedb.CommitAppendBatchParams {
	tenantID := c.cfg.TenantID
	now := p.now
	a := storedb.CommitAppendBatchParams{
		StoreID:      c.cfg.StoreID,
		CommittedEnd: p.committedEnd(),
		NextTurnID:   int64(c.nextTurn),
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
		p.appendTurnRow(&a, tenantID(t.meta.Tenant), t, now)
	}
	for _, nt := range p.newTypes {
		a.TypeTenantIds = append(a.TypeTenantIds, tenantID(nt.tenant))
		a.TypeRefs = append(a.TypeRefs, int32(nt.ref))
		a.TypeIds = append(a.TypeIds, nt.typeID)
	}
	for id, s := range p.heads {
		a.HeadTenantIds = append(a.HeadTenantIds, tenantID(s.Tenant))
		a.HeadContextIds = append(a.HeadContextIds, int64(id))
		a.HeadTurnIds = append(a.HeadTurnIds, int64(s.Head))
		a.HeadDepths = append(a.HeadDepths, int64(s.Depth))
	}
	for _, i := range p.keys {
		a.KeyTenantIds = append(a.KeyTenantIds, tenantID(p.turns[i].meta.Tenant))
		a.KeyContextIds = append(a.KeyContextIds, int64(p.turns[i].job.Request.ContextID))
		a.KeyValues = append(a.KeyValues, p.turns[i].job.Request.IdempotencyKey)
		a.KeyTurnIds = append(a.KeyTurnIds, int64(p.turns[i].id))
		a.KeyCreatedAts = append(a.KeyCreatedAts, now)
		a.KeyRequestedParents = append(a.KeyRequestedParents, int64(p.turns[i].job.Request.ParentTurnID))
	}
	for g := range p.grants {
		a.GrantTenantIds = append(a.GrantTenantIds, tenantID(g.Tenant))
		a.GrantHashes = append(a.GrantHashes, g.Hash[:])
	}
	return a
}

func (p *plan) appendTurnRow(a *storedb.CommitAppendBatchParams, tenant string, t plannedTurn, now time.Time) {
	req := t.job.Request
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
	a.ParentTurnIds = append(a.ParentTurnIds, int64(t.meta.Parent))
	a.Depths = append(a.Depths, int64(t.meta.Depth))
	a.TurnTypeIds = append(a.TurnTypeIds, req.TypeID)
	a.TypeVersions = append(a.TypeVersions, int64(t.meta.TypeVersion))
	a.Encodings = append(a.Encodings, int64(t.meta.Encoding))
	a.Compressions = append(a.Compressions, int64(t.meta.Compression))
	a.UncompressedLens = append(a.UncompressedLens, int64(t.meta.UncompressedLen))
	a.PayloadHashes = append(a.PayloadHashes, t.meta.Hash[:])
	a.FsRootHashes = append(a.FsRootHashes, fsRoot)
	a.IdempotencyKeys = append(a.IdempotencyKeys, key)
	a.CreatedAts = append(a.CreatedAts, now)
}

// answer sends every job its outcome after the group committed.
func (p *plan) answer() {
	results := make(map[*Job]storetype.AppendResult, len(p.turns))
	for _, t := range p.turns {
		results[t.job] = storetype.AppendResult{ContextID: t.contextID, TurnID: t.id, ParentID: t.meta.Parent, Depth: t.meta.Depth, ContentHash: t.meta.Hash}
	}
	for _, j := range p.jobs {
		j.done <- p.outcomeOf(j, results)
	}
}

func (p *plan) outcomeOf(j *Job, results map[*Job]storetype.AppendResult) Outcome {
	if o, ok := p.outcomes[j]; ok {
		return o
	}
	if i, ok := p.follows[j]; ok {
		r := results[p.turns[i].job]
		r.ContextID, r.Replayed = j.Request.ContextID, true
		return Outcome{Result: r}
	}
	if i, ok := p.putJobs[j]; ok {
		r := p.putResults[i]
		return Outcome{Entry: r.Entry, IsNew: r.New}
	}
	return Outcome{Result: results[j]}
}

// failPending answers err to every job of a group that did not commit,
// except those that failed their own validation. Replays fail too: their
// original may be in a group that failed as well.
func (p *plan) failPending(err error) {
	for _, j := range p.jobs {
		if o, ok := p.outcomes[j]; ok && o.Err != nil {
			j.done <- o
			continue
		}
		j.done <- Outcome{Err: err}
	}
}
