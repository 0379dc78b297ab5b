package apitest

import (
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/membudget"
)

// HeldWatch records the most a budget held while it ran.
type HeldWatch struct {
	stop chan struct{}
	done chan int64
	once sync.Once
	last int64
}

// WatchHeld watches b until the test ends or Most is called.
func WatchHeld(t testing.TB, b *membudget.Budget) *HeldWatch {
	t.Helper()
	w := &HeldWatch{stop: make(chan struct{}), done: make(chan int64, 1)}
	go func() {
		most := int64(0)
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			most = max(most, b.Held())
			select {
			case <-w.stop:
				w.done <- most
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { w.Most() })
	return w
}

// Most stops the watch and returns the most it saw held.
func (w *HeldWatch) Most() int64 {
	w.once.Do(func() {
		close(w.stop)
		w.last = <-w.done
	})
	return w.last
}
