package live

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Session is a connected binary-protocol session.
type Session struct {
	ID          uint64
	Tenant      string
	ClientTag   string
	PeerAddr    string
	ConnectedAt time.Time

	mu           sync.Mutex
	lastActivity time.Time
	contexts     []uint64 // created or forked by the session
}

// Touch records activity.
func (s *Session) Touch(now time.Time) {
	s.mu.Lock()
	s.lastActivity = now
	s.mu.Unlock()
}

// LastActivity is when the session last made a request.
func (s *Session) LastActivity() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastActivity
}

// Contexts are the contexts the session created or forked.
func (s *Session) Contexts() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.contexts)
}

// Hub tracks connected sessions and publishes their comings and goings on
// its Stream.
type Hub struct {
	Stream *Stream

	mu       sync.RWMutex
	sessions map[uint64]*Session
	creators map[uint64]*Session // context id → the live session that created it
}

// NewHub returns a hub with a stream keeping bufferSize events.
func NewHub(bufferSize int) *Hub {
	return &Hub{Stream: NewStream(bufferSize), sessions: map[uint64]*Session{}, creators: map[uint64]*Session{}}
}

// Connect registers a session and publishes client_connected.
func (h *Hub) Connect(s *Session) {
	s.lastActivity = s.ConnectedAt
	h.mu.Lock()
	h.sessions[s.ID] = s
	h.mu.Unlock()
	h.Stream.Publish(s.Tenant, ClientConnected, map[string]any{"session_id": idString(s.ID), "client_tag": s.ClientTag})
}

// Disconnect forgets a session and publishes client_disconnected.
func (h *Hub) Disconnect(id uint64) {
	h.mu.Lock()
	s, ok := h.sessions[id]
	delete(h.sessions, id)
	if ok {
		for _, c := range s.contexts {
			if h.creators[c] == s {
				delete(h.creators, c)
			}
		}
	}
	h.mu.Unlock()
	if !ok {
		return
	}
	ctxs := s.Contexts()
	ids := make([]string, len(ctxs))
	for i, c := range ctxs {
		ids[i] = idString(c)
	}
	h.Stream.Publish(s.Tenant, ClientDisconnected, map[string]any{
		"session_id": idString(s.ID), "client_tag": s.ClientTag, "contexts": ids,
	})
}

// Created records that session id created context ctxID.
func (h *Hub) Created(id, ctxID uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.sessions[id]
	if !ok {
		return
	}
	s.mu.Lock()
	s.contexts = append(s.contexts, ctxID)
	s.mu.Unlock()
	h.creators[ctxID] = s
}

// Creator returns the live session that created a context, if any.
func (h *Hub) Creator(ctxID uint64) (*Session, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	s, ok := h.creators[ctxID]
	return s, ok
}

// Sessions returns the tenant's live sessions, oldest first.
func (h *Hub) Sessions(tenant string) []*Session {
	h.mu.RLock()
	out := make([]*Session, 0, len(h.sessions))
	for _, s := range h.sessions {
		if s.Tenant == tenant {
			out = append(out, s)
		}
	}
	h.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Session) int { return compareUint(a.ID, b.ID) })
	return out
}

// Count returns how many of the tenant's sessions (every tenant's when
// tenant is "") are connected, and how many of them have been idle for at
// least idle.
func (h *Hub) Count(tenant string, now time.Time, idle time.Duration) (total, idleCount int) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, s := range h.sessions {
		if tenant != "" && s.Tenant != tenant {
			continue
		}
		total++
		if now.Sub(s.LastActivity()) >= idle {
			idleCount++
		}
	}
	return total, idleCount
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type sessionKey struct{}

// WithSession tells the calls made with ctx which session makes them.
func WithSession(ctx context.Context, s *Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// SessionFrom returns the session of ctx, if any.
func SessionFrom(ctx context.Context) (*Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(*Session)
	return s, ok
}
