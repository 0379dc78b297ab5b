package testkit

import (
	"sync"
	"time"
)

// Clock is a settable clock for code that takes its time (and its timers)
// as functions: its time moves only when the test says, and the timers
// that come due then run on the test's goroutine. It is safe for
// concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*Timer
}

// NewClock returns a clock that reads start until it is moved.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock by d and runs the timers due by then, in the order
// they were made.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*Timer
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	// Outside the lock: a timer's function may read the clock or make
	// another timer.
	for _, t := range due {
		t.f()
	}
}

// AfterFunc is time.AfterFunc on the clock: f runs when Add moves the
// clock d or more past now.
func (c *Clock) AfterFunc(d time.Duration, f func()) *Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &Timer{at: c.now.Add(d), f: f, clock: c}
	c.timers = append(c.timers, t)
	return t
}

// Timer is a timer of a Clock.
type Timer struct {
	at      time.Time
	f       func()
	stopped bool // stopped or fired
	clock   *Clock
}

// Stop prevents the timer from firing, reporting whether that stopped
// it (false when it had fired or was stopped already), as time.Timer.Stop.
func (t *Timer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}
