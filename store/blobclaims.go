package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pace"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/internal/claimwatch"
	"github.com/cardboxhq/cardbox/store/internal/fswalk"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/internal/usage"
)

// Releasing blob claims. The blobs the turns buried by the reaper named
// (payloads, fs roots) are queued in blob_claim_reviews with the burial;
// the reaper then releases the tenant's claim to each one nothing of the
// tenant's own still needs: no turn's payload, nothing a turn's fs root
// reaches, no upload (PUT_BLOB) or grant younger than the grace. A
// first writer's claim is released with a row of released_blob_claims
// (the pack's record is never rewritten), a grant by deleting its row of
// tenant_blobs. The bytes stay in the pack; no other tenant's claims
// change.

// DefaultBlobClaimGrace is the default Options.BlobClaimGrace.
const DefaultBlobClaimGrace = 24 * time.Hour

const (
	claimWalkBudget = 200_000 // tree objects one release reads
	claimAttempts   = 3       // releases tried while the tenant writes
	claimTenants    = 100     // tenants listed at a time
)

// Variables for tests: releaseChunk is how many claims one statement
// releases, claimReviewBatch how many queued blobs one batch reviews,
// claimPayloadWindow how many queued blobs one scan of the tenant's turns
// checks for payloads (claimNeeds).
var (
	releaseChunk             = 2000
	claimReviewBatch   int32 = 1000
	claimPayloadWindow       = 100_000
)

// released reports whether t, the blob's first writer, released its
// claim to it.
func (e *Engine) released(t ident.Tenant, h ident.Hash) bool {
	return e.usage.Released(usage.Grant{Tenant: t.No, Hash: h})
}

func (e *Engine) blobClaimGrace() time.Duration {
	if e.opts.BlobClaimGrace > 0 {
		return e.opts.BlobClaimGrace
	}
	return DefaultBlobClaimGrace
}

// putRewrite is the fraction of the grace after which an upload writes
// its row of blob_puts again: one younger keeps the claim for at least
// the rest of the grace, so an upload whose row was written less than
// grace/putRewrite ago writes nothing.
const putRewrite = 4

// recordPut records that t uploaded blob h now, which keeps its claim for
// the grace period: a row of blob_puts, unless this process wrote it
// less than a quarter of the grace ago (e.puts), which keeps the claim
// for three quarters of the grace at least.
func (e *Engine) recordPut(ctx context.Context, t ident.Tenant, h ident.Hash) error {
	now, fresh := e.now(), e.blobClaimGrace()/putRewrite
	if e.puts.Fresh(t.No, h, now, fresh) {
		return nil
	}
	err := e.as(pgrole.Tenant, t.ID).RecordBlobPut(ctx, storedb.RecordBlobPutParams{TenantID: t.ID, BlobHash: h[:], PutAt: now})
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "record the upload of blob %x", h)
	}
	e.puts.Note(t.No, h, now, fresh)
	return nil
}

// loadReleasedClaims reads the released first writers' claims at start.
func (e *Engine) loadReleasedClaims(ctx context.Context) error {
	rows, err := e.as(pgrole.Recovery, "").ListReleasedBlobClaims(ctx)
	if err != nil {
		return fmt.Errorf("load released blob claims: %w", err)
	}
	for _, r := range rows {
		if len(r.BlobHash) != len(ident.Hash{}) {
			continue
		}
		g := usage.Grant{Tenant: uint32(r.TenantNo), Hash: ident.Hash(r.BlobHash)}
		var size int64
		if entry, ok := e.blobs.Lookup(g.Hash); ok && entry.Owner == g.Tenant {
			size = int64(entry.RawLen)
		}
		e.usage.Release(g, size)
	}
	return nil
}

// errClaimsBusy says some tenant wrote throughout every attempt to
// release its claims: the queue keeps them for a later pass.
var errClaimsBusy = errors.New("release blob claims: a tenant kept writing; retrying later")

// releaseClaims releases the claims the queued reviews find no longer
// needed, every tenant's, and returns how many it released; the reaper
// runs it (under reapMu) once the dead turns are buried.
func (e *Engine) releaseClaims(ctx context.Context, budget *pace.Budget) (int, error) {
	sweep := e.as(pgrole.Sweeper, "")
	if err := sweep.PruneBlobPuts(ctx, e.now().Add(-e.blobClaimGrace())); err != nil {
		return 0, fmt.Errorf("prune blob uploads older than the grace: %w", err)
	}
	total := 0
	busy := []string{}
	for {
		ids, err := sweep.ListBlobClaimReviewTenants(ctx, storedb.ListBlobClaimReviewTenantsParams{Now: e.now(), Skip: busy, MaxTenants: claimTenants})
		if err != nil {
			return total, fmt.Errorf("list tenants with blobs to review: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			n, done, err := e.releaseTenantClaims(ctx, id, budget)
			total += n
			if err != nil {
				return total, fmt.Errorf("release blob claims of tenant %q: %w", id, err)
			}
			if !done {
				busy = append(busy, id)
			}
		}
	}
	if len(busy) > 0 {
		return total, errClaimsBusy
	}
	return total, nil
}

// releaseTenantClaims works through a tenant's queued reviews, a batch a
// step of budget; done is false when the tenant kept writing.
func (e *Engine) releaseTenantClaims(ctx context.Context, id string, budget *pace.Budget) (released int, done bool, err error) {
	t, err := e.tenants.get(ctx, id)
	gone := err != nil && fault.KindOf(err) == fault.NotFound
	if err != nil && !gone {
		return 0, false, fmt.Errorf("look up tenant: %w", err)
	}
	if !gone {
		// From here on the tenant's writes are noted (see claimwatch),
		// and what is read below of its needs holds but for them.
		e.gate.Quiesce(func() { e.claims.Start(t.No) })
		defer e.claims.Stop(t.No)
	}
	needs := &claimNeeds{}
	for {
		var n int
		var more, busy bool
		err := budget.Step(ctx, func() (err error) {
			n, more, busy, err = e.releaseNext(ctx, t, id, gone, needs)
			return err
		})
		released += n
		switch {
		case err != nil:
			return released, false, err
		case busy:
			return released, false, nil
		case !more:
			return released, true, nil
		}
	}
}

// releaseNext works through the next batch of the tenant's queued
// reviews: more is false when there was none, busy true when the tenant
// kept writing through every attempt (see releaseBatch).
func (e *Engine) releaseNext(ctx context.Context, t ident.Tenant, id string, gone bool, needs *claimNeeds) (released int, more, busy bool, err error) {
	sweep := e.as(pgrole.Sweeper, id)
	reviews, err := sweep.ListBlobClaimReviews(ctx, storedb.ListBlobClaimReviewsParams{TenantID: id, Now: e.now(), MaxReviews: int32(claimReviewBatch)})
	if err != nil {
		return 0, false, false, fmt.Errorf("list blobs to review: %w", err)
	}
	if len(reviews) == 0 {
		return 0, false, false, nil
	}
	if gone || e.gate.Gone(t.No) {
		// A deleted tenant's rows go with it; its reviews are dropped.
		if err := sweep.ReleaseBlobClaims(ctx, reviewed(id, reviews)); err != nil {
			return 0, false, false, fmt.Errorf("drop the reviews of a deleted tenant: %w", err)
		}
		return 0, true, false, nil
	}
	for attempt := 0; ; attempt++ {
		n, ok, err := e.releaseBatch(ctx, t, reviews, needs)
		if err != nil {
			return released, false, false, err
		}
		released += n
		if ok {
			return released, true, false, nil
		}
		if attempt+1 == claimAttempts {
			return released, false, true, nil
		}
	}
}

// reviewed are the parameters that only take reviews off the queue.
func reviewed(tenantID string, reviews []storedb.ListBlobClaimReviewsRow) storedb.ReleaseBlobClaimsParams {
	p := storedb.ReleaseBlobClaimsParams{TenantID: tenantID, Released: [][]byte{}, Ungranted: [][]byte{}}
	for _, r := range reviews {
		p.ReviewedHashes = append(p.ReviewedHashes, r.BlobHash)
		p.ReviewedFsRoots = append(p.ReviewedFsRoots, r.FsRoot)
	}
	return p
}

// releaseBatch releases the claims of t that a batch of reviews finds
// unneeded. What t needs is worked out outside the write gate; the
// release commits under it (Quiesce), unless a write of t that may make
// it need a blob was admitted meanwhile: ok false, nothing done. So no
// upload, append or attachment of t can interleave: one admitted before
// is seen, one admitted after finds the claim released and claims the
// blob again (a grant). A review whose blobs an upload or grant younger
// than the grace keeps stays queued until the grace ends.
func (e *Engine) releaseBatch(ctx context.Context, t ident.Tenant, reviews []storedb.ListBlobClaimReviewsRow, needs *claimNeeds) (int, bool, error) {
	e.gate.Quiesce(func() { needs.absorb(e.claims.Take(t.No), e.now()) })
	sweep := e.as(pgrole.Sweeper, t.ID)
	read := e.treeReader()
	candidates := map[ident.Hash]struct{}{}
	named := make([][]ident.Hash, len(reviews)) // the blobs each review names
	dead := fswalk.New(read, claimWalkBudget)
	for i, r := range reviews {
		if len(r.BlobHash) != len(ident.Hash{}) {
			continue
		}
		h := ident.Hash(r.BlobHash)
		named[i] = append(named[i], h)
		if r.FsRoot && read != nil {
			// What is left unwalked keeps its claim.
			dead.Walk(h, func(x ident.Hash) { named[i] = append(named[i], x) })
		}
		for _, x := range named[i] {
			candidates[x] = struct{}{}
		}
	}
	until, err := e.spareNeeded(ctx, t, candidates, reviews, read, needs)
	if err != nil {
		return 0, false, err
	}
	p := storedb.ReleaseBlobClaimsParams{TenantID: t.ID, ReviewedHashes: [][]byte{}, ReviewedFsRoots: []bool{}} // the reviews done
	deferred := storedb.DeferBlobClaimReviewsParams{TenantID: t.ID}
	for i, r := range reviews {
		var wait time.Time
		for _, x := range named[i] {
			if u, ok := until[x]; ok && u.After(wait) {
				wait = u
			}
		}
		if wait.IsZero() {
			p.ReviewedHashes = append(p.ReviewedHashes, r.BlobHash)
			p.ReviewedFsRoots = append(p.ReviewedFsRoots, r.FsRoot)
			continue
		}
		deferred.BlobHashes = append(deferred.BlobHashes, r.BlobHash)
		deferred.FsRoots = append(deferred.FsRoots, r.FsRoot)
		deferred.NotBefores = append(deferred.NotBefores, wait)
	}
	var releases, ungrants []usage.Grant
	if len(candidates) > 0 {
		hashes := make([][]byte, 0, len(candidates))
		for h := range candidates {
			hashes = append(hashes, h[:])
		}
		granted, err := sweep.TenantBlobsAmong(ctx, storedb.TenantBlobsAmongParams{TenantID: t.ID, BlobHashes: hashes})
		if err != nil {
			return 0, false, fmt.Errorf("look up grants: %w", err)
		}
		for _, g := range granted {
			if len(g) == len(ident.Hash{}) {
				ungrants = append(ungrants, usage.Grant{Tenant: t.No, Hash: ident.Hash(g)})
			}
		}
		for h := range candidates {
			if entry, ok := e.blobs.Lookup(h); ok && entry.Owner == t.No && !e.released(t, h) {
				releases = append(releases, usage.Grant{Tenant: t.No, Hash: h})
			}
		}
	}
	if e.opts.beforeRelease != nil {
		e.opts.beforeRelease()
	}
	// In chunks, each one short statement while every write waits; the
	// reviews go with the last. A chunk that finds the tenant wrote since
	// stops the batch: what went before was released rightly (nothing
	// of the tenant had changed), the rest is reviewed again.
	released := 0
	for {
		n := min(len(releases), releaseChunk)
		m := min(len(ungrants), releaseChunk-n)
		last := n == len(releases) && m == len(ungrants)
		chunk := storedb.ReleaseBlobClaimsParams{
			TenantID: t.ID, Released: hashesOf(releases[:n]), Ungranted: hashesOf(ungrants[:m]),
			ReviewedHashes: [][]byte{}, ReviewedFsRoots: []bool{},
		}
		if last {
			chunk.ReviewedHashes, chunk.ReviewedFsRoots = p.ReviewedHashes, p.ReviewedFsRoots
		}
		ok := false
		e.gate.Quiesce(func() {
			noted := e.claims.Take(t.No)
			needs.absorb(noted, e.now())
			if names(noted, releases[:n], ungrants[:m]) {
				return
			}
			ok = true
			qctx, cancel := context.WithTimeout(ctx, e.opts.PGTimeout)
			defer cancel()
			if err = sweep.ReleaseBlobClaims(qctx, chunk); err != nil {
				return
			}
			for _, g := range releases[:n] {
				e.usage.Release(g, e.rawLen(g.Hash))
			}
			for _, g := range ungrants[:m] {
				e.usage.Ungrant(g, e.rawLen(g.Hash))
			}
			if n+m > 0 {
				// A tree found whole before may not be any more.
				e.trees.forget(t.No)
			}
		})
		if err != nil {
			return released, false, fmt.Errorf("release %d claims and %d grants: %w", n, m, err)
		}
		if !ok {
			return released, false, nil
		}
		released += n + m
		e.noteReleased(releases[:n], ungrants[:m])
		releases, ungrants = releases[n:], ungrants[m:]
		if last {
			break
		}
	}
	if len(deferred.BlobHashes) > 0 {
		if err := sweep.DeferBlobClaimReviews(ctx, deferred); err != nil {
			return released, false, fmt.Errorf("defer %d reviews to the end of their grace: %w", len(deferred.BlobHashes), err)
		}
	}
	return released, true, nil
}

func hashesOf(gs []usage.Grant) [][]byte {
	out := make([][]byte, len(gs))
	for i, g := range gs {
		out[i] = g.Hash[:]
	}
	return out
}

// claimNeeds is what a pass over a tenant's reviews read of its turns,
// kept across batches while no write of the tenant that may make it need
// a blob is admitted (its write count stays at stamp): which hashes are
// payloads of its turns, asked for the next claimPayloadWindow queued
// blobs at once, and the fs roots of its turns. Only the reaper, which
// runs the pass, takes turn rows away.
type claimNeeds struct {
	asked     map[ident.Hash]struct{} // hashes asked about the tenant's turns
	inTurns   map[ident.Hash]struct{} // of those, payloads of its turns
	roots     [][]byte
	rootsRead bool
	// What the tenant's writes named since the release began: appended
	// payloads (needed, whether or not a read saw their turns yet) and
	// uploads (kept for the grace from when they were noted).
	payloads map[ident.Hash]struct{}
	putAt    map[ident.Hash]time.Time
}

// absorb adds what the tenant's writes named since the last look to what
// was read of its needs: appended payloads are payloads of its turns, an
// upload keeps its blob for the grace from now; a write whose needs are
// not known by name (an fs root) makes everything be read again.
func (n *claimNeeds) absorb(noted claimwatch.Noted, now time.Time) {
	if noted.Unsure {
		n.asked, n.inTurns, n.roots, n.rootsRead = nil, nil, nil, false
	}
	if n.payloads == nil {
		n.payloads, n.putAt = map[ident.Hash]struct{}{}, map[ident.Hash]time.Time{}
	}
	for h := range noted.Payloads {
		n.payloads[h] = struct{}{}
	}
	for h := range noted.Puts {
		n.putAt[h] = now
	}
}

// names reports whether the writes noted may make the tenant need a blob
// of the lists.
func names(noted claimwatch.Noted, lists ...[]usage.Grant) bool {
	if noted.Unsure {
		return true
	}
	for _, gs := range lists {
		for _, g := range gs {
			if noted.Named(g.Hash) {
				return true
			}
		}
	}
	return false
}

// spareNeeded removes from candidates the blobs t still needs: a turn's
// payload, an upload or grant younger than the grace, and whatever a
// turn's fs root reaches. When the fs roots cannot all be walked (the
// budget runs out, a tree object is unreadable, no decoder), every
// candidate is kept. It returns when the grace of the blobs an upload or
// grant keeps ends.
func (e *Engine) spareNeeded(ctx context.Context, t ident.Tenant, candidates map[ident.Hash]struct{},
	reviews []storedb.ListBlobClaimReviewsRow, read fswalk.ReadTree, needs *claimNeeds) (map[ident.Hash]time.Time, error) {
	until := map[ident.Hash]time.Time{}
	if len(candidates) == 0 {
		return until, nil
	}
	sweep := e.as(pgrole.Sweeper, t.ID)
	hashes := make([][]byte, 0, len(candidates))
	for h := range candidates {
		hashes = append(hashes, h[:])
	}
	rows, err := sweep.BlobClaimsNeeded(ctx, storedb.BlobClaimsNeededParams{TenantID: t.ID, BlobHashes: hashes})
	if err != nil {
		return nil, fmt.Errorf("look up the blobs still needed: %w", err)
	}
	grace, now := e.blobClaimGrace(), e.now()
	for _, r := range rows {
		if len(r.BlobHash) != len(ident.Hash{}) {
			continue
		}
		h := ident.Hash(r.BlobHash)
		if end := r.LastClaimed.Add(grace); end.After(now) {
			until[h] = end
			delete(candidates, h)
		}
	}
	for h := range needs.payloads {
		delete(candidates, h)
	}
	for h, at := range needs.putAt {
		if _, ok := candidates[h]; ok {
			if end := at.Add(grace); end.After(until[h]) {
				until[h] = end
			}
			delete(candidates, h)
		}
	}
	if err := e.askPayloads(ctx, t, candidates, reviews, needs); err != nil {
		return nil, err
	}
	for h := range candidates {
		if _, ok := needs.inTurns[h]; ok {
			delete(candidates, h)
		}
	}
	if len(candidates) == 0 {
		return until, nil
	}
	if !needs.rootsRead {
		if needs.roots, err = sweep.TenantFSRoots(ctx, t.ID); err != nil {
			return nil, fmt.Errorf("list fs roots: %w", err)
		}
		needs.rootsRead = true
	}
	if len(needs.roots) == 0 {
		return until, nil
	}
	if read == nil {
		clear(candidates)
		return until, nil
	}
	live := fswalk.New(read, claimWalkBudget)
	for _, r := range needs.roots {
		if len(candidates) == 0 {
			break
		}
		if len(r) != len(ident.Hash{}) {
			continue
		}
		if !live.Walk(ident.Hash(r), func(x ident.Hash) { delete(candidates, x) }) {
			clear(candidates)
			break
		}
	}
	return until, nil
}

// askPayloads makes needs know which of candidates are payloads of t's
// turns, asking with one scan of t's turns about those it does not know.
// When a blob of the batch's reviews is among them, it asks about the
// next claimPayloadWindow blobs queued for review too, which the next
// batches take; what it knew is forgotten then.
func (e *Engine) askPayloads(ctx context.Context, t ident.Tenant, candidates map[ident.Hash]struct{},
	reviews []storedb.ListBlobClaimReviewsRow, needs *claimNeeds) error {
	ask := map[ident.Hash]struct{}{}
	for h := range candidates {
		if _, ok := needs.asked[h]; !ok {
			ask[h] = struct{}{}
		}
	}
	if len(ask) == 0 {
		return nil
	}
	window := len(needs.asked) > 2*claimPayloadWindow // bounds what is kept
	for _, r := range reviews {
		if len(r.BlobHash) == len(ident.Hash{}) {
			if _, ok := ask[ident.Hash(r.BlobHash)]; ok {
				window = true
				break
			}
		}
	}
	sweep := e.as(pgrole.Sweeper, t.ID)
	if window {
		queued, err := sweep.ListBlobClaimReviews(ctx, storedb.ListBlobClaimReviewsParams{TenantID: t.ID, Now: e.now(), MaxReviews: int32(claimPayloadWindow)})
		if err != nil {
			return fmt.Errorf("list the blobs queued for review: %w", err)
		}
		for _, r := range queued {
			if len(r.BlobHash) == len(ident.Hash{}) {
				ask[ident.Hash(r.BlobHash)] = struct{}{}
			}
		}
	}
	hashes := make([][]byte, 0, len(ask))
	for h := range ask {
		hashes = append(hashes, h[:])
	}
	found, err := sweep.TenantPayloadsAmong(ctx, storedb.TenantPayloadsAmongParams{TenantID: t.ID, BlobHashes: hashes})
	if err != nil {
		return fmt.Errorf("look up the payloads of the tenant's turns: %w", err)
	}
	if window || needs.asked == nil {
		needs.asked, needs.inTurns = map[ident.Hash]struct{}{}, map[ident.Hash]struct{}{}
	}
	for h := range ask {
		needs.asked[h] = struct{}{}
	}
	for _, h := range found {
		if len(h) == len(ident.Hash{}) {
			needs.inTurns[ident.Hash(h)] = struct{}{}
		}
	}
	return nil
}

// treeReader reads tree objects from the pack; nil without a decoder.
func (e *Engine) treeReader() fswalk.ReadTree {
	if e.opts.FSTree == nil {
		return nil
	}
	return func(h ident.Hash) ([]fswalk.Child, error) {
		data, err := e.blobs.View(h)
		if err != nil {
			return nil, err
		}
		entries, err := e.opts.FSTree(data)
		if err != nil {
			return nil, err
		}
		out := make([]fswalk.Child, 0, len(entries))
		for _, en := range entries {
			if en.HashOK {
				out = append(out, fswalk.Child{Hash: en.Hash, Tree: en.Kind == FSDir})
			}
		}
		return out, nil
	}
}

func (e *Engine) rawLen(h ident.Hash) int64 {
	if entry, ok := e.blobs.Lookup(h); ok {
		return int64(entry.RawLen)
	}
	return 0
}

// noteReleased counts the records of the blobs whose claims were released
// as possibly dead (see NoteDeadBlobs): without the claims the pack may
// hold no claimed copy of them, and the erasure bound holds only for bytes
// counted. A blob another tenant still claims costs an extra look.
func (e *Engine) noteReleased(lists ...[]usage.Grant) {
	var hashes []ident.Hash
	for _, gs := range lists {
		for _, g := range gs {
			hashes = append(hashes, g.Hash)
		}
	}
	e.NoteDeadBlobs(hashes)
}
