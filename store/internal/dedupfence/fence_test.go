package dedupfence

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitAsync runs f.Wait(ctx) on a goroutine and returns where its error
// comes.
func waitAsync(ctx context.Context, f *Fence) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f.Wait(ctx) }()
	return done
}

// blockedChan makes f tell, on the channel returned, each time a Wait
// blocks.
func blockedChan(f *Fence) <-chan struct{} {
	ch := make(chan struct{}, 16)
	f.Blocked = func() { ch <- struct{}{} }
	return ch
}

func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing came", what)
		var zero T
		return zero
	}
}

func TestWaitWithNothingInFlight(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fence *Fence
	}{
		{"zero fence", &Fence{}},
		{"nil fence", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tk := tt.fence.Enter()
			tk.Leave()
			if err := tt.fence.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := tt.fence.InFlight(); n != 0 {
				t.Errorf("%d in flight", n)
			}
		})
	}
}

// A ticket entered before Wait holds it until it leaves, however many
// Waits gave up (their ctx ended) after it entered.
func TestWaitWaitsForTicketsEnteredBefore(t *testing.T) {
	t.Parallel()
	for _, gaveUp := range []int{0, 1, 2, 3} {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			f := &Fence{}
			old := f.Enter()
			ended, cancel := context.WithCancel(context.Background())
			cancel()
			for range gaveUp {
				if err := f.Wait(ended); !errors.Is(err, context.Canceled) {
					t.Fatalf("a Wait whose ctx ended: %v", err)
				}
			}
			blocked := blockedChan(f)
			done := waitAsync(context.Background(), f)
			recv(t, "Wait blocked", blocked)
			select {
			case err := <-done:
				t.Fatalf("Wait returned (%v) with a ticket entered before it in flight", err)
			default:
			}
			old.Leave()
			if err := recv(t, "Wait returned", done); err != nil {
				t.Fatal(err)
			}
			if n := f.InFlight(); n != 0 {
				t.Errorf("%d in flight", n)
			}
		})
	}
}

// Writers enter and leave all the while; every Wait returns only after
// each writer it found in flight has left.
func TestWaitUnderLoad(t *testing.T) {
	t.Parallel()
	const writers = 8
	f := &Fence{}
	var gens [writers]atomic.Uint64 // odd: in flight
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				tk := f.Enter()
				gens[i].Add(1)
				for range i % 3 {
					gens[i].Load() // a little work
				}
				gens[i].Add(1)
				tk.Leave()
			}
		})
	}
	for range 500 {
		var seen [writers]uint64
		for i := range gens {
			seen[i] = gens[i].Load()
		}
		if err := f.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i := range gens {
			if seen[i]%2 == 1 && gens[i].Load() == seen[i] {
				t.Fatalf("writer %d was in flight before Wait and still is after it", i)
			}
		}
	}
	close(stop)
	wg.Wait()
	if n := f.InFlight(); n != 0 {
		t.Errorf("%d in flight", n)
	}
}
