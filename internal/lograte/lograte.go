// Package lograte keeps a server's log readable while a fault repeats:
// the first event of a kind is logged at once, the next ones of that kind
// within an interval are counted and logged as one line at its end
// ("binary request failed: 503 UNAVAILABLE ×16,843 in the last 5s"), so
// that a kind of event makes at most a line per interval however often it
// happens. Metrics, not the log, count every event.
//
// A Limiter starts no goroutine: a summary is due at the end of its
// interval, logged by a timer (time.AfterFunc) or by the next event of
// its kind, whichever comes first; Stop logs the summaries still due, for
// a server shutting down.
package lograte

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Key is a kind of event: the surface it happened on ("http",
// "binary"), its status (a code) and kind ("UNAVAILABLE").
type Key struct {
	Surface string
	Status  int
	Kind    string
}

// DefaultInterval is Options.Interval when it is zero.
const DefaultInterval = 5 * time.Second

// Timer is what AfterFunc returns (*time.Timer).
type Timer interface{ Stop() bool }

// Options configure a Limiter.
type Options struct {
	// Interval is how long events of a kind after one that was logged
	// are counted before their count is logged (DefaultInterval).
	Interval time.Duration
	// Now and AfterFunc are the clock (time.Now and time.AfterFunc when
	// nil); tests give a fake one.
	Now       func() time.Time
	AfterFunc func(d time.Duration, f func()) Timer
}

// Limiter logs events of each kind at most once per interval, and the
// count of the others. It is safe for concurrent use.
type Limiter struct {
	log       *slog.Logger
	interval  time.Duration
	now       func() time.Time
	afterFunc func(time.Duration, func()) Timer

	mu      sync.Mutex
	windows map[Key]*window
	stopped bool
}

// window is a kind's current interval: from the event logged (or the last
// summary) until end, the events counted, and the last one's record.
type window struct {
	start, end time.Time
	count      int64
	level      slog.Level
	msg        string
	args       []any
	timer      Timer // logs the summary at end; nil when none is due
}

// New returns a Limiter logging to log.
func New(log *slog.Logger, opts Options) *Limiter {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AfterFunc == nil {
		opts.AfterFunc = func(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
	}
	return &Limiter{log: log, interval: opts.Interval, now: opts.Now, afterFunc: opts.AfterFunc, windows: map[Key]*window{}}
}

// Log logs msg with args (slog's key-value pairs) at level, unless an
// event of key was logged within the interval: then it is counted, and
// the count logged at the end of the interval with the last event's
// args. After a Stop every event is logged.
func (l *Limiter) Log(ctx context.Context, level slog.Level, key Key, msg string, args ...any) {
	if !l.log.Enabled(ctx, level) {
		return
	}
	now := l.now()
	l.mu.Lock()
	w := l.windows[key]
	if w != nil && !now.Before(w.end) {
		// Its interval is over and its timer has not run yet.
		l.flushLocked(ctx, key, w, now)
		w = l.windows[key]
	}
	if w == nil || l.stopped {
		if !l.stopped {
			l.windows[key] = &window{start: now, end: now.Add(l.interval)}
		}
		l.mu.Unlock()
		l.log.Log(ctx, level, msg, args...)
		return
	}
	w.count++
	w.level, w.msg, w.args = level, msg, args
	if w.timer == nil {
		w.timer = l.afterFunc(w.end.Sub(now), func() { l.due(key) })
	}
	l.mu.Unlock()
}

// due logs key's summary if its interval is over (its timer ran).
func (l *Limiter) due(key Key) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := l.windows[key]; w != nil && !now.Before(w.end) {
		l.flushLocked(context.Background(), key, w, now)
	}
}

// flushLocked ends w, whose interval is over (or the Limiter stops): with
// events counted it logs their summary and opens the next interval, in
// which the next event is counted too (a fault that goes on makes a line
// per interval); without, the kind is quiet and its next event is logged
// at once.
func (l *Limiter) flushLocked(ctx context.Context, key Key, w *window, now time.Time) {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if w.count == 0 {
		delete(l.windows, key)
		return
	}
	end := w.end
	if now.Before(end) {
		end = now // Stop, before the interval is over
	}
	span := end.Sub(w.start)
	summary := fmt.Sprintf("%s: %d %s ×%s in the last %v", w.msg, key.Status, key.Kind, thousands(w.count), span.Round(100*time.Millisecond))
	args := append([]any{"surface", key.Surface, "status", key.Status, "kind", key.Kind, "repeated", w.count, "interval", span}, w.args...)
	// Logged under the lock, so that a kind's lines keep their order; a
	// handler does not call back into the Limiter.
	l.log.Log(ctx, w.level, summary, args...)
	next := now
	if now.Before(w.end) {
		next = w.end
	}
	l.windows[key] = &window{start: next, end: next.Add(l.interval)}
}

// Stop logs the counts of events not logged yet and stops the timers;
// later events are logged one by one.
func (l *Limiter) Stop() {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	for key, w := range l.windows {
		l.flushLocked(context.Background(), key, w, now)
	}
	clear(l.windows)
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
