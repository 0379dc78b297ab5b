// Package sealer seals the closed segments of the blob pack and the turn
// log (see docs/storage.md, Segments): once all of a closed segment's
// bytes are committed, its length and BLAKE3 go to sealed_segments. At
// start it checks the sealed segments against the files, and settles two
// generations of one segment that a compaction killed half-way left.
package sealer

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/syncfile"
)

// The streams of sealed_segments: the blob pack and the turn log.
const (
	Blobs = "blobs"
	Turns = "turns"
)

// retry is how soon the sealer looks again while a closed segment waits
// for its last group's COMMIT, or after Postgres failed it.
const retry = time.Second

// Files are one stream's segments: the blob pack's or the turn log's.
type Files interface {
	// Segments lists every segment, the active one last.
	Segments() []segment.Info
	// Closed lists the segments no longer written.
	Closed() []segment.Info
}

// key names a sealed segment.
type key struct {
	stream string
	start  int64
}

// Sealer seals closed segments. Its goroutine is woken by each rollover;
// sealing is off the append path, and an append waits for none of it.
type Sealer struct {
	wake chan struct{}
	// mu guards sealed: written by Check, then by the goroutine, and
	// read by IsSealed.
	mu     sync.Mutex
	sealed map[key]segment.ID
	// packDurable is an end of the blob pack the store knows every byte
	// below is durable for good, beyond the committed end Postgres
	// records (see Durable); guarded by mu.
	packDurable int64
	stop        context.CancelFunc
	done        chan struct{}
}

// New returns a sealer that knows of no sealed segment yet.
func New() *Sealer {
	return &Sealer{wake: make(chan struct{}, 1), sealed: map[key]segment.ID{}}
}

// IsSealed reports whether the segment starting at start of stream is
// sealed.
func (s *Sealer) IsSealed(stream string, start int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.sealed[key{stream, start}]
	return ok
}

// MarkSealed records that segment id of stream is sealed (as a
// compaction's swap leaves its rewrite).
func (s *Sealer) MarkSealed(stream string, id segment.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sealed[key{stream, id.Start}] = id
}

// PackDurable tells the sealer that every byte of the blob pack below end
// is written, fsynced and never cut back, so that a closed segment ending
// there may be sealed before a commit row records the pack's end (a
// group of blobs alone records none; the next turn's does). The store
// tells it so of each segment the pack closes, and of what a start kept:
// the pack publishes only fsynced records, and nothing cuts back a valid
// record of it, committed or not. It only wakes the sealer: it may be
// called with a writer's lock held.
func (s *Sealer) PackDurable(end int64) {
	s.mu.Lock()
	s.packDurable = max(s.packDurable, end)
	s.mu.Unlock()
	s.Wake(segment.Info{})
}

func (s *Sealer) packDurableEnd() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.packDurable
}

// Wake is the files' segment.Options.OnRollover: it runs with a writer's
// lock held, so it only wakes the sealer.
func (s *Sealer) Wake(segment.Info) {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Check is recovery's check of the sealed segments against the files:
// each must be there, closed, of its generation and length. A missing or
// changed sealed segment lost committed bytes (its BLAKE3 is checked by
// cardbox verify, which reads every byte); its error ends with refusal.
func (s *Sealer) Check(ctx context.Context, q *storedb.Queries, storeID pgtype.UUID, blobs, turns Files, refusal string) error {
	rows, err := q.ListSealedSegments(ctx, storeID)
	if err != nil {
		return fmt.Errorf("list sealed segments: %w", err)
	}
	files := map[string][]segment.Info{Blobs: blobs.Segments(), Turns: turns.Segments()}
	for _, r := range rows {
		if err := checkSegment(r, files[r.Stream]); err != nil {
			return fmt.Errorf("%w: %s", err, refusal)
		}
		s.MarkSealed(r.Stream, segment.ID{Start: r.StartOffset, Gen: uint32(r.Generation)})
	}
	return nil
}

func checkSegment(r storedb.ListSealedSegmentsRow, segs []segment.Info) error {
	for i, s := range segs {
		if s.ID.Start != r.StartOffset {
			continue
		}
		switch {
		case s.ID.Gen != uint32(r.Generation):
			return fmt.Errorf("sealed segment %s of the %s is generation %d, but %s is on disk", s.Path, r.Stream, r.Generation, s.Path)
		case i == len(segs)-1:
			return fmt.Errorf("sealed segment %s of the %s is the last one: the segments after it are missing", s.Path, r.Stream)
		case s.Length != r.Length:
			return fmt.Errorf("sealed segment %s of the %s has %d bytes, sealed with %d", s.Path, r.Stream, s.Length, r.Length)
		}
		return nil
	}
	return fmt.Errorf("sealed segment at offset %d (generation %d, %d bytes) of the %s is missing", r.StartOffset, r.Generation, r.Length, r.Stream)
}

// run is what the sealing goroutine works with.
type run struct {
	s            *Sealer
	q            *storedb.Queries
	storeID      pgtype.UUID
	blobs, turns Files
	log          *slog.Logger
}

// Start starts the goroutine that seals closed segments of blobs and
// turns, and has it look at once: a process that died between a
// rollover and the seal left a closed segment to seal.
func (s *Sealer) Start(q *storedb.Queries, storeID pgtype.UUID, blobs, turns Files, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop, s.done = cancel, make(chan struct{})
	s.Wake(segment.Info{})
	go (&run{s: s, q: q, storeID: storeID, blobs: blobs, turns: turns, log: log}).loop(ctx)
}

// Stop stops the goroutine, abandoning a seal in progress: the next
// start seals it. A sealer never started stops at once.
func (s *Sealer) Stop() {
	if s.stop == nil {
		return
	}
	s.stop()
	<-s.done
}

func (r *run) loop(ctx context.Context) {
	defer close(r.s.done)
	var again <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.s.wake:
		case <-again:
		}
		again = nil
		pending, err := r.sealCommitted(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("sealing segments failed; trying again", "err", err)
		}
		if pending || err != nil {
			again = time.After(retry)
		}
	}
}

// sealCommitted seals every closed segment whose bytes are all committed
// and reports whether a closed one is left waiting for a COMMIT.
func (r *run) sealCommitted(ctx context.Context) (pending bool, err error) {
	state, err := r.q.GetTurnLogState(ctx)
	if err != nil {
		return true, fmt.Errorf("read the committed ends: %w", err)
	}
	for _, s := range []struct {
		stream    string
		closed    []segment.Info
		committed int64
	}{
		{Blobs, r.blobs.Closed(), max(state.PackEnd, r.s.packDurableEnd())},
		{Turns, r.turns.Closed(), state.CommittedEnd},
	} {
		for _, seg := range s.closed {
			if r.s.IsSealed(s.stream, seg.ID.Start) {
				continue
			}
			if seg.End() > s.committed {
				pending = true
				continue
			}
			if err := r.seal(ctx, s.stream, seg); err != nil {
				return true, err
			}
			r.s.MarkSealed(s.stream, seg.ID)
		}
	}
	return pending, nil
}

// seal hashes a closed, committed segment and records it.
func (r *run) seal(ctx context.Context, stream string, seg segment.Info) error {
	sum, n, err := segment.Sum(ctx, seg.Path)
	if err != nil {
		return err
	}
	if n != seg.Length {
		return fmt.Errorf("seal %s: %d bytes on disk, closed at %d", seg.Path, n, seg.Length)
	}
	err = r.q.SealSegment(ctx, storedb.SealSegmentParams{
		StoreID: r.storeID, Stream: stream, StartOffset: seg.ID.Start,
		Generation: int32(seg.ID.Gen), Length: seg.Length, Blake3: sum[:],
	})
	if err != nil {
		return fmt.Errorf("seal %s: %w", seg.Path, err)
	}
	r.log.Info("segment sealed", "file", seg.Path, "bytes", seg.Length)
	return nil
}

// The states of a segment Stats counts: sealed (closed, its bytes all
// committed and recorded in sealed_segments), closed (not written any
// more, waiting for its last group's COMMIT or for the sealer), and
// active (the one appends write).
const (
	Sealed = "sealed"
	Closed = "closed"
	Active = "active"
)

// Stats counts the segments of one file in one state.
type Stats struct {
	// File is Blobs or Turns; State is Sealed, Closed or Active.
	File, State string
	Count       int
	// Bytes are the stream's bytes the segments hold: the active
	// segment's up to the file's data end, without its reservation.
	Bytes int64
}

// Stats counts the segments of both files by state, every state of each
// file listed, in a fixed order; packEnd and logEnd are the files' data
// ends.
func (s *Sealer) Stats(blobs, turns []segment.Info, packEnd, logEnd int64) []Stats {
	var out []Stats
	for _, f := range []struct {
		stream string
		segs   []segment.Info
		end    int64
	}{
		{Blobs, blobs, packEnd},
		{Turns, turns, logEnd},
	} {
		sealed := Stats{File: f.stream, State: Sealed}
		closed := Stats{File: f.stream, State: Closed}
		active := Stats{File: f.stream, State: Active}
		for i, seg := range f.segs {
			switch {
			case i == len(f.segs)-1:
				active.Count, active.Bytes = 1, max(0, f.end-seg.ID.Start)
			case s.IsSealed(f.stream, seg.ID.Start):
				sealed.Count++
				sealed.Bytes += seg.Length
			default:
				closed.Count++
				closed.Bytes += seg.Length
			}
		}
		out = append(out, sealed, closed, active)
	}
	return out
}

// Settle removes, of two generations of one segment, the file
// sealed_segments does not name (docs/storage.md, Segments): a compaction
// killed before its swap committed leaves its rewrite, the next
// generation, beside the sealed one; killed after it, the old generation
// beside the rewrite Postgres now names, which was fsynced before the
// swap. Postgres decides which one the stream holds, as it decides
// which turns exist. Generations of a segment that is not sealed, or
// sealed as neither, are left as they are: opening the files then
// refuses them, naming both. blobs and turns are the files' layouts.
func Settle(ctx context.Context, q *storedb.Queries, storeID pgtype.UUID, blobs, turns segment.Layout, log *slog.Logger) error {
	rows, err := q.ListSealedSegments(ctx, storeID)
	if err != nil {
		return fmt.Errorf("list sealed segments: %w", err)
	}
	named := map[key]uint32{}
	for _, r := range rows {
		named[key{r.Stream, r.StartOffset}] = uint32(r.Generation)
	}
	for _, f := range []struct {
		stream string
		layout segment.Layout
	}{
		{Blobs, blobs},
		{Turns, turns},
	} {
		ids, err := f.layout.All()
		if err != nil {
			return err
		}
		removed := false
		for i, j := 0, 0; i < len(ids); i = j {
			for j = i + 1; j < len(ids) && ids[j].Start == ids[i].Start; j++ {
			}
			gen, sealed := named[key{f.stream, ids[i].Start}]
			if j-i == 1 || !sealed || !slices.Contains(ids[i:j], segment.ID{Start: ids[i].Start, Gen: gen}) {
				continue
			}
			for _, id := range ids[i:j] {
				if id.Gen == gen {
					continue
				}
				if err := os.Remove(f.layout.Path(id)); err != nil {
					return fmt.Errorf("remove %s, a generation of a segment that Postgres does not name: %w", f.layout.Path(id), err)
				}
				log.Info("segment generation removed: sealed_segments names another",
					"file", f.layout.Path(id), "kept", f.layout.Path(segment.ID{Start: id.Start, Gen: gen}))
				removed = true
			}
		}
		if removed {
			if err := syncfile.Dir(f.layout.Dir); err != nil {
				return fmt.Errorf("remove segment generations of the %s: %w", f.stream, err)
			}
		}
	}
	return nil
}
