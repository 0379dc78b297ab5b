// Package logtest keeps what a server logs at ERROR, for tests that
// require it to log none: servers log internal failures and 500s at that
// level.
package logtest

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// Errors is a slog.Handler that keeps the records at ERROR and above, each
// as its message and attributes. It is safe for concurrent use.
type Errors struct{ kept }

// Enabled reports whether lvl is ERROR or above.
func (l *Errors) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= slog.LevelError }

// WithAttrs returns l: the records' own attributes say enough.
func (l *Errors) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l.
func (l *Errors) WithGroup(string) slog.Handler { return l }

// All is a slog.Handler that keeps every record, at any level, as its
// message and attributes: for tests that check what is logged at all
// (that no secret is). It is safe for concurrent use.
type All struct{ kept }

// Enabled reports true: every level is kept.
func (l *All) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs returns l.
func (l *All) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l.
func (l *All) WithGroup(string) slog.Handler { return l }

// kept is the record store of Errors and All.
type kept struct {
	mu   sync.Mutex
	recs []string
}

// Handle keeps r (the handler's Enabled chose it).
func (k *kept) Handle(_ context.Context, r slog.Record) error {
	s := format(r)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.recs = append(k.recs, s)
	return nil
}

// Records returns the records kept so far.
func (k *kept) Records() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.recs)
}

// format is a record's message and attributes.
func format(r slog.Record) string {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	return b.String()
}

// Tee is a slog.Handler that hands each record to every handler enabled
// for its level.
type Tee []slog.Handler

// Enabled reports whether any handler is enabled for lvl.
func (t Tee) Enabled(ctx context.Context, lvl slog.Level) bool {
	return slices.ContainsFunc(t, func(h slog.Handler) bool { return h.Enabled(ctx, lvl) })
}

// Handle hands r to the handlers enabled for its level.
func (t Tee) Handle(ctx context.Context, r slog.Record) error {
	for _, h := range t {
		if h.Enabled(ctx, r.Level) {
			if err := h.Handle(ctx, r.Clone()); err != nil {
				return err
			}
		}
	}
	return nil
}

// WithAttrs returns t with attrs on every handler.
func (t Tee) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make(Tee, len(t))
	for i, h := range t {
		out[i] = h.WithAttrs(attrs)
	}
	return out
}

// WithGroup returns t with the group on every handler.
func (t Tee) WithGroup(name string) slog.Handler {
	out := make(Tee, len(t))
	for i, h := range t {
		out[i] = h.WithGroup(name)
	}
	return out
}
