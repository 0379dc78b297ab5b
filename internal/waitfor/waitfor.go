// Package waitfor waits in tests for a condition another goroutine or
// process brings about, by polling what it can observe (a row, a lock, a
// counter) rather than sleeping for a guessed time.
package waitfor

import (
	"runtime"
	"testing"
	"time"
)

// pollEvery is how often a condition is checked.
const pollEvery = 10 * time.Millisecond

// Patience is how long Soon waits: far longer than anything a test waits
// for takes on an idle machine, so that a busy one does not fail it.
const Patience = 10 * time.Second

// True polls cond until it holds, and fails the test (from the test's
// goroutine) when it does not within d.
func True(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	if !poll(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// Soon is True with the usual patience.
func Soon(t testing.TB, what string, cond func() bool) {
	t.Helper()
	True(t, what, Patience, cond)
}

// GoroutinesAtMost waits until no more than n goroutines run (those a
// test started have ended), and fails the test with every goroutine's
// stack when they do not within Patience.
func GoroutinesAtMost(t testing.TB, n int) {
	t.Helper()
	if !poll(Patience, func() bool { return runtime.NumGoroutine() <= n }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("after %v, %d goroutines run, want at most %d:\n%s",
			Patience, runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
	}
}

// poll reports whether cond held within d.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
	return true
}
