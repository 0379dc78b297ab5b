// Package waitfor waits in tests for a condition another goroutine or
// process brings about, by polling what it can observe (a row, a lock, a
// counter) rather than sleeping for a guessed time.
package waitfor

import (
	"testing"
	"time"
)

// pollEvery is how often a condition is checked.
const pollEvery = 10 * time.Millisecond

// True polls cond until it holds, and fails the test (from the test's
// goroutine) when it does not within d.
func True(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(pollEvery)
	}
}
