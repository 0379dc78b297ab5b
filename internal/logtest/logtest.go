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
type Errors struct {
	mu   sync.Mutex
	recs []string
}

// Enabled reports whether lvl is ERROR or above.
func (l *Errors) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= slog.LevelError }

// Handle keeps r.
func (l *Errors) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, b.String())
	return nil
}

// WithAttrs returns l: the records' own attributes say enough.
func (l *Errors) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l.
func (l *Errors) WithGroup(string) slog.Handler { return l }

// Records returns the records kept so far.
func (l *Errors) Records() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}
