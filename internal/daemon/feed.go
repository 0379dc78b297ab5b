package daemon

import "sync"

// feed tells its subscribers of each value published, in order, on the
// publisher's goroutine: how the store tells the CXDB service and the
// analytics projector of commits, and the service tells the projector of
// publications, without knowing either. Subscribers must return quickly.
type feed[T any] struct {
	mu   sync.RWMutex
	subs []func(T)
}

// subscribe adds fn; the daemon subscribes before it serves.
func (f *feed[T]) subscribe(fn func(T)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs = append(f.subs, fn)
}

// publish tells every subscriber of v.
func (f *feed[T]) publish(v T) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, fn := range f.subs {
		fn(v)
	}
}
