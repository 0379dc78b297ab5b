package store

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
)

// maxKeyLookups bounds the keys one lookup query asks for.
const maxKeyLookups = 1024

// keyLookups asks Postgres about the idempotency keys memory may have
// forgotten for its cap. Once memory has forgotten one, every keyed append
// asks for a day, so the appends waiting together are asked about in one
// query per tenant, as the committer writes them in one statement, rather
// than in a transaction each: while a query runs the next appends queue up,
// and the next query takes them all.
type keyLookups struct {
	mu      sync.Mutex
	waiting []*keyLookup
	running bool         // a goroutine is draining waiting
	asked   atomic.Int64 // appends asked about, for tests
}

// keyLookup is one append's question and, once done is closed, its answer.
type keyLookup struct {
	tenant    ident.Tenant
	contextID uint64
	key       []byte
	since     time.Time // rows at or before it are expired

	done  chan struct{}
	row   storedb.ListIdempotencyKeysRow
	found bool
	err   error
}

// lookupKey answers whether key was used in tenant's context after since:
// the newest row of the window, if any.
func (e *Engine) lookupKey(ctx context.Context, t ident.Tenant, contextID uint64, key []byte, since time.Time) (storedb.ListIdempotencyKeysRow, bool, error) {
	// The key is copied: it may be the request's buffer, which its
	// connection reuses once answered, and an abandoned lookup is still
	// asked about.
	l := &keyLookup{tenant: t, contextID: contextID, key: bytes.Clone(key), since: since, done: make(chan struct{})}
	k := &e.keyLookups
	k.asked.Add(1)
	k.mu.Lock()
	k.waiting = append(k.waiting, l)
	if !k.running {
		k.running = true
		go e.drainKeyLookups()
	}
	k.mu.Unlock()
	select {
	case <-l.done:
		return l.row, l.found, l.err
	case <-ctx.Done():
		// The drain answers l all the same; nobody reads it.
		return storedb.ListIdempotencyKeysRow{}, false, fault.Wrap(fault.Unavailable, ctx.Err(), "look up idempotency key")
	}
}

// drainKeyLookups answers the waiting lookups, a batch at a time, until
// none is left.
func (e *Engine) drainKeyLookups() {
	k := &e.keyLookups
	for {
		k.mu.Lock()
		n := min(len(k.waiting), maxKeyLookups)
		if n == 0 {
			k.running = false
			k.waiting = nil
			k.mu.Unlock()
			return
		}
		batch := k.waiting[:n:n]
		k.waiting = k.waiting[n:]
		k.mu.Unlock()
		e.answerKeyLookups(batch)
	}
}

// answerKeyLookups asks Postgres about a batch, one query per tenant (its
// rows are readable only as the tenant), and closes every lookup's done.
func (e *Engine) answerKeyLookups(batch []*keyLookup) {
	byTenant := make(map[string][]*keyLookup)
	for _, l := range batch {
		byTenant[l.tenant.ID] = append(byTenant[l.tenant.ID], l)
	}
	for tenant, ls := range byTenant {
		arg := storedb.ListIdempotencyKeysParams{
			TenantID:        tenant,
			ContextIds:      make([]int64, len(ls)),
			IdempotencyKeys: make([][]byte, len(ls)),
			Since:           ls[0].since,
		}
		for i, l := range ls {
			arg.ContextIds[i], arg.IdempotencyKeys[i] = int64(l.contextID), l.key
			if l.since.Before(arg.Since) {
				arg.Since = l.since
			}
		}
		// Bounded by the store's Postgres timeout; no caller's context
		// ends the query for the others.
		rows, err := e.as(pgrole.Tenant, tenant).ListIdempotencyKeys(context.Background(), arg)
		if err != nil {
			err = fault.Wrap(fault.Unavailable, err, "look up idempotency key")
		}
		type name struct {
			contextID uint64
			key       string
		}
		newest := make(map[name][]storedb.ListIdempotencyKeysRow, len(rows))
		for _, r := range rows { // newest first
			n := name{uint64(r.ContextID), string(r.IdempotencyKey)}
			newest[n] = append(newest[n], r)
		}
		for _, l := range ls {
			l.err = err
			for _, r := range newest[name{l.contextID, string(l.key)}] {
				if r.CreatedAt.After(l.since) { // the query's since may be earlier
					l.row, l.found = r, true
					break
				}
			}
			close(l.done)
		}
	}
}
