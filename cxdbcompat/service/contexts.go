package service

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/cql"
	"github.com/cardboxhq/cardbox/cxdbcompat/ctxmeta"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/metastore"
)

// Context list limits: the reference's default, and the most one page
// holds (more are reached with the cursor, never cut silently).
const (
	DefaultContextLimit = 20
	MaxContextLimit     = 1000
)

// ContextQuery selects a page of contexts, newest append first.
type ContextQuery struct {
	Limit  int    // DefaultContextLimit when 0; at most MaxContextLimit
	Cursor string // from ContextList.NextCursor
	// Filters, applied before the limit. Tag is the client tag exactly
	// ("" = untagged) when HasTag; Labels must all be present; Title is a
	// case-insensitive substring.
	Tag               string
	HasTag            bool
	Labels            []string
	Title             string
	Query             *cql.Query
	IncludeProvenance bool
	// Charge accounts for the page's entries and for the metadata a
	// filter looks at.
	Charge
}

// ContextEntry is a context as GET /v1/contexts lists it.
type ContextEntry struct {
	ContextID      string              `json:"context_id"`
	HeadTurnID     string              `json:"head_turn_id"`
	HeadDepth      uint32              `json:"head_depth"`
	CreatedAtMs    int64               `json:"created_at_unix_ms"`
	UpdatedAtMs    int64               `json:"updated_at_unix_ms"`
	IsLive         bool                `json:"is_live"`
	ClientTag      string              `json:"client_tag,omitempty"`
	SessionID      string              `json:"session_id,omitempty"`
	LastActivityAt int64               `json:"last_activity_at,omitempty"`
	Title          string              `json:"title,omitempty"`
	Labels         []string            `json:"labels,omitempty"`
	Provenance     *ctxmeta.Provenance `json:"provenance,omitempty"`
}

// SessionEntry is a live binary session as GET /v1/contexts lists it.
type SessionEntry struct {
	SessionID      string `json:"session_id"`
	ClientTag      string `json:"client_tag"`
	ConnectedAt    int64  `json:"connected_at"`
	LastActivityAt int64  `json:"last_activity_at"`
	ContextCount   int    `json:"context_count"`
	PeerAddr       string `json:"peer_addr,omitempty"`
}

// ContextList is a page of contexts.
type ContextList struct {
	Contexts       []ContextEntry `json:"contexts"`
	Count          int            `json:"count"`
	NextCursor     string         `json:"next_cursor,omitempty"`
	HasMore        bool           `json:"has_more"`
	ActiveSessions []SessionEntry `json:"active_sessions"`
	ActiveTags     []string       `json:"active_tags"`
}

// context is one context with what listings need of it.
type contextRow struct {
	info store.ContextInfo
	meta *metastore.ContextMeta
}

// ListContexts returns a page of the tenant's contexts, most recently
// appended first.
func (s *Service) ListContexts(ctx context.Context, t ident.Tenant, q ContextQuery) (*ContextList, error) {
	if q.Limit == 0 {
		q.Limit = DefaultContextLimit
	}
	if q.Limit < 0 || q.Limit > MaxContextLimit {
		return nil, invalidParam("limit", "between 1 and %d", MaxContextLimit)
	}
	after, err := decodeContextCursor(q.Cursor)
	if err != nil {
		return nil, err
	}
	rows, err := s.filteredContexts(ctx, t, q)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(rows, func(a, b contextRow) int { return compareNewestFirst(a.info, b.info) })
	if after != nil {
		i, _ := slices.BinarySearchFunc(rows, *after, func(r contextRow, c contextCursor) int { return c.compare(r.info) })
		rows = rows[i:]
	}
	list := &ContextList{HasMore: len(rows) > q.Limit}
	rows = rows[:min(len(rows), q.Limit)]
	// The page stops before the entry that would take its contexts past
	// MaxPageBytes, or that Reserve has no room for, before its metadata
	// is loaded; its first entry is always answered.
	page := answerBytes{reserve: q.Reserve}
	n, err := s.loadPage(ctx, t, rows, &page, func(r contextRow) int {
		e := s.entry(r, q.IncludeProvenance)
		return e.size()
	})
	if err != nil {
		return nil, err
	}
	if n < len(rows) {
		rows, list.HasMore = rows[:n], true
	}
	list.Contexts = make([]ContextEntry, len(rows))
	for i, r := range rows {
		list.Contexts[i] = s.entry(r, q.IncludeProvenance)
	}
	if list.HasMore {
		list.NextCursor = encodeContextCursor(rows[len(rows)-1].info)
	}
	list.Count = len(list.Contexts)
	list.ActiveSessions, list.ActiveTags = s.activeSessions(t)
	return list, nil
}

// filteredContexts returns the tenant's contexts that pass q's filters,
// without their metadata: a filter looks at it in batches
// (scanMetadata), and the page loads its own entries' again.
func (s *Service) filteredContexts(ctx context.Context, t ident.Tenant, q ContextQuery) ([]contextRow, error) {
	infos := s.Contexts(t)
	rows := make([]contextRow, len(infos))
	for i, info := range infos {
		rows[i] = contextRow{info: info}
	}
	if !q.HasTag && len(q.Labels) == 0 && q.Title == "" && q.Query == nil {
		return rows, nil
	}
	now := s.now()
	var kept []contextRow
	err := s.scanMetadata(ctx, t, rows, q.Charge, func(batch []contextRow) {
		for _, r := range batch {
			if s.matches(r, q, now) {
				kept = append(kept, contextRow{info: r.info})
			}
		}
	})
	return kept, err
}

func (s *Service) matches(r contextRow, q ContextQuery, now time.Time) bool {
	e := s.entry(r, false)
	if q.HasTag && e.ClientTag != q.Tag {
		return false
	}
	for _, l := range q.Labels {
		if !slices.Contains(e.Labels, l) {
			return false
		}
	}
	if q.Title != "" && !strings.Contains(strings.ToLower(e.Title), strings.ToLower(q.Title)) {
		return false
	}
	if q.Query != nil {
		rec := s.record(r)
		return q.Query.Match(&rec, now)
	}
	return true
}

// entry renders a context: metadata first, then the creating session
// while it is connected.
func (s *Service) entry(r contextRow, withProvenance bool) ContextEntry {
	e := ContextEntry{
		ContextID: idString(r.info.ContextID), HeadTurnID: idString(r.info.TurnID), HeadDepth: r.info.Depth,
		CreatedAtMs: r.info.CreatedAt.UnixMilli(), UpdatedAtMs: r.info.UpdatedAt.UnixMilli(),
	}
	if sess, ok := s.hub.Creator(r.info.ContextID); ok {
		e.IsLive, e.SessionID, e.LastActivityAt = true, idString(sess.ID), sess.LastActivity().UnixMilli()
		e.ClientTag = sess.ClientTag
	}
	if m := r.meta; m != nil {
		if m.ClientTag != nil && *m.ClientTag != "" {
			e.ClientTag = *m.ClientTag
		}
		if m.Title != nil {
			e.Title = *m.Title
		}
		e.Labels = m.Labels
		if withProvenance {
			e.Provenance = s.provenance(r)
		}
	}
	return e
}

// provenance decodes a context's stored provenance, filling the client
// address from its live session when the writer did not give one.
func (s *Service) provenance(r contextRow) *ctxmeta.Provenance {
	if r.meta == nil || r.meta.Provenance == nil {
		return nil
	}
	var p ctxmeta.Provenance
	if err := json.Unmarshal(r.meta.Provenance, &p); err != nil {
		return nil
	}
	if sess, ok := s.hub.Creator(r.info.ContextID); ok && p.ClientAddress == nil && sess.PeerAddr != "" {
		addr := sess.PeerAddr
		p.ClientAddress = &addr
	}
	return &p
}

func (s *Service) activeSessions(t ident.Tenant) ([]SessionEntry, []string) {
	sessions := s.hub.Sessions(t.ID)
	out := make([]SessionEntry, len(sessions))
	tags := []string{}
	for i, sess := range sessions {
		out[i] = SessionEntry{
			SessionID: idString(sess.ID), ClientTag: sess.ClientTag, ConnectedAt: sess.ConnectedAt.UnixMilli(),
			LastActivityAt: sess.LastActivity().UnixMilli(), ContextCount: len(sess.Contexts()), PeerAddr: sess.PeerAddr,
		}
		if sess.ClientTag != "" && !slices.Contains(tags, sess.ClientTag) {
			tags = append(tags, sess.ClientTag)
		}
	}
	return out, tags
}

// Context returns one context as listings show it, with provenance.
func (s *Service) ContextEntry(ctx context.Context, t ident.Tenant, id uint64) (ContextEntry, error) {
	info, err := s.Context(t, id)
	if err != nil {
		return ContextEntry{}, err
	}
	found, err := s.metas.Metadata(ctx, t, []uint64{id})
	if err != nil {
		return ContextEntry{}, err
	}
	row := contextRow{info: info}
	if m, ok := found[id]; ok {
		row.meta = &m
	}
	return s.entry(row, true), nil
}

// Provenance returns a context's provenance, nil when it has none.
func (s *Service) Provenance(ctx context.Context, t ident.Tenant, id uint64) (*ctxmeta.Provenance, error) {
	e, err := s.ContextEntry(ctx, t, id)
	return e.Provenance, err
}

func compareNewestFirst(a, b store.ContextInfo) int {
	if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
		return c
	}
	return cmp.Compare(b.ContextID, a.ContextID)
}

// contextCursor is the position after the last context of a page.
type contextCursor struct {
	updatedMs int64
	id        uint64
}

// compare places a context against the cursor: -1 when it was on an
// earlier page (the cursor's own context included), 1 when it comes after.
func (c contextCursor) compare(info store.ContextInfo) int {
	at := store.ContextInfo{Head: store.Head{ContextID: c.id}, UpdatedAt: time.UnixMilli(c.updatedMs)}
	if compareNewestFirst(info, at) <= 0 {
		return -1
	}
	return 1
}

func encodeContextCursor(info store.ContextInfo) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "c1:%d:%d", info.UpdatedAt.UnixMilli(), info.ContextID))
}

func decodeContextCursor(s string) (*contextCursor, error) {
	if s == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	parts := strings.Split(string(raw), ":")
	if err != nil || len(parts) != 3 || parts[0] != "c1" {
		return nil, invalidParam("cursor", "not a cursor of this listing")
	}
	ms, err1 := strconv.ParseInt(parts[1], 10, 64)
	id, err2 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, invalidParam("cursor", "not a cursor of this listing")
	}
	return &contextCursor{updatedMs: ms, id: id}, nil
}
