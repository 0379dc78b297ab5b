package service

import (
	"cmp"
	"context"
	"slices"

	"github.com/cardboxhq/cardbox/cxdbcompat/cql"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// SearchEntry is a context as GET /v1/contexts/search lists it.
type SearchEntry struct {
	ContextID   string `json:"context_id"`
	HeadTurnID  string `json:"head_turn_id"`
	HeadDepth   uint32 `json:"head_depth"`
	CreatedAtMs int64  `json:"created_at_unix_ms"`
	IsLive      bool   `json:"is_live"`
	ClientTag   string `json:"client_tag,omitempty"`
	Title       string `json:"title,omitempty"`
}

// SearchResult is what GET /v1/contexts/search answers of a search.
type SearchResult struct {
	Contexts []SearchEntry
	Total    int // how many matched, before the limit
	// Truncated says the answer stopped before its limit (or before
	// every match, without one) because its contexts would have passed
	// MaxPageBytes of JSON.
	Truncated bool
}

// Search returns the tenant's contexts matching q, newest id first, at
// most limit (0: all) and at most MaxPageBytes of them (Truncated then
// says so; the first is always answered), and how many matched. Every
// context is searched, forks and contexts without turns included; depth
// and created are the current head's. charge accounts for the metadata
// looked at (in batches) and the entries, as a list's; its Reserve may
// end the answer (Truncated) as MaxPageBytes does.
func (s *Service) Search(ctx context.Context, t ident.Tenant, q *cql.Query, limit int, charge Charge) (*SearchResult, error) {
	rows, err := s.filteredContexts(ctx, t, ContextQuery{})
	if err != nil {
		return nil, err
	}
	// Each batch is matched and forgotten; what matched is found again by
	// id, newest first, and only the answer's entries load their metadata.
	now := s.now()
	var matched []contextRow
	err = s.scanMetadata(ctx, t, rows, charge, func(batch []contextRow) {
		for _, r := range batch {
			if rec := s.record(r); q.Match(&rec, now) {
				matched = append(matched, contextRow{info: r.info})
			}
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(matched, func(a, b contextRow) int { return cmp.Compare(b.info.ContextID, a.info.ContextID) })
	res := &SearchResult{Total: len(matched)}
	if limit > 0 && limit < len(matched) {
		matched = matched[:limit]
	}
	answer := answerBytes{reserve: charge.Reserve}
	n, err := s.loadPage(ctx, t, matched, &answer, func(r contextRow) int {
		e := s.searchEntry(r)
		return e.size()
	})
	if err != nil {
		return nil, err
	}
	res.Truncated = n < len(matched)
	res.Contexts = make([]SearchEntry, n)
	for i, r := range matched[:n] {
		res.Contexts[i] = s.searchEntry(r)
	}
	return res, nil
}

// searchEntry renders a context as a search answers it: its tag is its
// metadata's only, as CQL's.
func (s *Service) searchEntry(r contextRow) SearchEntry {
	e := s.entry(r, false)
	se := SearchEntry{
		ContextID: e.ContextID, HeadTurnID: e.HeadTurnID, HeadDepth: e.HeadDepth,
		CreatedAtMs: e.CreatedAtMs, IsLive: e.IsLive, Title: e.Title,
	}
	if r.meta != nil {
		se.ClientTag = deref(r.meta.ClientTag)
	}
	return se
}

// record is what CQL sees of a context.
func (s *Service) record(r contextRow) cql.Record {
	rec := cql.Record{
		ID: r.info.ContextID, CreatedMs: r.info.CreatedAt.UnixMilli(), Depth: r.info.Depth,
	}
	_, rec.IsLive = s.hub.Creator(r.info.ContextID)
	if m := r.meta; m != nil {
		rec.Tag, rec.Title, rec.Labels = deref(m.ClientTag), deref(m.Title), m.Labels
	}
	if p := s.provenance(r); p != nil {
		rec.User, rec.Service, rec.Host, rec.TraceID = deref(p.OnBehalfOf), deref(p.ServiceName), deref(p.HostName), deref(p.TraceID)
		if p.ParentContextID != nil {
			rec.Parent, rec.HasParent = uint64(*p.ParentContextID), true
		}
		if p.RootContextID != nil {
			rec.Root, rec.HasRoot = uint64(*p.RootContextID), true
		}
	}
	return rec
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
