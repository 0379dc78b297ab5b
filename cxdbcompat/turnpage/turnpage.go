// Package turnpage renders pages of a context's turns as the CXDB HTTP
// API's turn objects (spec 4.5): the typed view through the registry and
// package projection, the raw view's bytes, per-turn errors, each page
// within service.MaxPageBytes. It is the wire format of the pages the
// service selects, shared by the HTTP surface and CardBox's derivation
// from CXDB, and keeps the turns it rendered in a cache of its own.
package turnpage

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/bytecache"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store"
)

// Source is what rendering needs of CXDB (*service.Service): the turns a
// query selects, their metadata and their payloads, and tenants by id.
type Source interface {
	Tenant(ctx context.Context, id string) (ident.Tenant, error)
	SelectTurns(ctx context.Context, t ident.Tenant, contextID uint64, q *service.TurnQuery) (*service.TurnSelection, error)
	TurnInfo(t ident.Tenant, id uint64) (store.Turn, bool)
	TurnPayload(ctx context.Context, t ident.Tenant, id uint64) ([]byte, error)
}

// DefaultCacheBytes is the rendered-turn cache's budget when New is
// given 0.
const DefaultCacheBytes = 64 << 20

// Pages renders turn pages from a Source. It is safe for concurrent use.
type Pages struct {
	src Source
	// rendered holds turn objects as pages render them; nil when off.
	rendered *bytecache.Cache[renderKey]
}

// New returns the pages of src, keeping rendered turns in a cache of
// cacheBytes: DefaultCacheBytes when 0, none when negative.
func New(src Source, cacheBytes int64) *Pages {
	if cacheBytes == 0 {
		cacheBytes = DefaultCacheBytes
	}
	return &Pages{src: src, rendered: bytecache.New[renderKey](cacheBytes)}
}

// Tenant resolves a tenant id through the source, so that Pages is all
// a reader of rendered turns needs (CardBox's derivation from CXDB).
func (p *Pages) Tenant(ctx context.Context, id string) (ident.Tenant, error) {
	return p.src.Tenant(ctx, id)
}

// ForgetTenant drops the rendered turns of a deleted tenant.
func (p *Pages) ForgetTenant(t ident.Tenant) {
	p.rendered.DropIf(func(k renderKey) bool { return k.tenant == t.No })
}

// ForgetDeadTurns drops the rendered turns of the tenant's turns that dead
// says died with a deleted context.
func (p *Pages) ForgetDeadTurns(t ident.Tenant, dead func(turnID uint64) bool) {
	p.rendered.DropIf(func(k renderKey) bool { return k.tenant == t.No && dead(k.turn) })
}

// Page is a page of turns, oldest first, each rendered as the CXDB HTTP
// API's turn object.
type Page struct {
	Context  store.ContextInfo
	BundleID string // the registry's last bundle, "" when none
	Turns    []json.RawMessage
	// Oldest and Newest are the ids of the first and last turn returned.
	Oldest, Newest uint64
	// HasOlder and HasNewer say whether the chain goes on past the page.
	HasOlder, HasNewer bool
	// Cut says the page stopped before its limit, at service.MaxPageBytes.
	Cut bool
}

// Turns returns a page of a context's chain.
func (p *Pages) Turns(ctx context.Context, t ident.Tenant, contextID uint64, q service.TurnQuery) (*Page, error) {
	sel, err := p.src.SelectTurns(ctx, t, contextID, &q)
	if err != nil {
		return nil, err
	}
	ids := sel.IDs
	page := &Page{Context: sel.Context, BundleID: sel.Registry.LastBundleID(), HasOlder: sel.HasOlder, HasNewer: sel.HasNewer}
	r := renderer{src: p.src, cache: p.rendered, t: t, reg: sel.Registry, q: &q, last: &lastPayload{}}
	// A page towards the head keeps its oldest turns; any other its
	// newest, as GET_LAST does.
	newer := q.After != 0
	turns, err := r.page(ctx, ids, newer)
	if err != nil {
		return nil, err
	}
	if page.Cut = len(turns) < len(ids); page.Cut {
		if newer {
			ids, page.HasNewer = ids[:len(turns)], true
		} else {
			ids, page.HasOlder = ids[len(ids)-len(turns):], true
		}
	}
	page.Turns = turns
	if len(ids) > 0 {
		page.Oldest, page.Newest = ids[0], ids[len(ids)-1]
	}
	return page, nil
}

// idString renders an id as CXDB's HTTP JSON does: a decimal string.
func idString(id uint64) string { return strconv.FormatUint(id, 10) }
