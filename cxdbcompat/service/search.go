package service

import (
	"context"

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
// and created are the current head's. reserve, if not nil, is told each
// entry's bytes as ContextQuery.Reserve is, and may end the answer
// (Truncated) as MaxPageBytes does.
func (s *Service) Search(ctx context.Context, t ident.Tenant, q *cql.Query, limit int, reserve func(n int64) error) (*SearchResult, error) {
	rows, err := s.filteredContexts(ctx, t, ContextQuery{})
	if err != nil {
		return nil, err
	}
	all, err := s.Metadata(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	records := make([]cql.Record, len(rows))
	byID := make(map[uint64]contextRow, len(rows))
	for i, r := range rows {
		if m, ok := all[r.info.ContextID]; ok {
			r.meta = &m
		}
		records[i] = s.record(r)
		byID[r.info.ContextID] = r
	}
	matches, total := cql.Filter(q, records, s.now(), limit)
	res := &SearchResult{Contexts: make([]SearchEntry, 0, len(matches)), Total: total}
	answer := answerBytes{reserve: reserve}
	for i, m := range matches {
		e := s.entry(byID[m.ID], false)
		se := SearchEntry{
			ContextID: e.ContextID, HeadTurnID: e.HeadTurnID, HeadDepth: e.HeadDepth,
			CreatedAtMs: e.CreatedAtMs, IsLive: e.IsLive, ClientTag: m.Tag, Title: e.Title,
		}
		fits, err := answer.add(i == 0, se.size())
		if err != nil {
			return nil, err
		}
		if !fits {
			res.Truncated = true
			break
		}
		res.Contexts = append(res.Contexts, se)
	}
	return res, nil
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
