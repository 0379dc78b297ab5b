package holerecorder

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/cardboxhq/cardbox/store/blobpack"
)

// A hole queued before Start is recorded once the recorder runs; one that
// Postgres refuses is tried again, in order, until it is taken.
func TestRecordsQueuedHolesInOrderRetryingRefusals(t *testing.T) {
	recorded := make(chan int64, 4)
	refusals := 1
	r := New(func(_ context.Context, h blobpack.Hole) error {
		if h.Offset == 200 && refusals > 0 { // the recorder's goroutine only: no lock needed
			refusals--
			return errors.New("postgres does not answer")
		}
		recorded <- h.Offset
		return nil
	}, slog.New(slog.DiscardHandler))
	r.Add(blobpack.Hole{Offset: 100, End: 150})
	r.Start()
	defer r.Stop()
	r.Add(blobpack.Hole{Offset: 200, End: 250})
	r.Add(blobpack.Hole{Offset: 300, End: 350})
	for _, want := range []int64{100, 200, 300} {
		if got := <-recorded; got != want {
			t.Fatalf("recorded the hole at %d, want %d", got, want)
		}
	}
}

// Stop without Start does nothing: a store whose recovery failed never
// started its recorder.
func TestStopBeforeStart(t *testing.T) {
	r := New(func(context.Context, blobpack.Hole) error { return nil }, slog.New(slog.DiscardHandler))
	r.Add(blobpack.Hole{Offset: 1})
	r.Stop()
}
