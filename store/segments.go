package store

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/syncfile"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// The streams of sealed_segments: the blob pack and the turn log.
const (
	streamBlobs = "blobs"
	streamTurns = "turns"
)

// sealRetry is how soon the sealer looks again while a closed segment
// waits for its last group's COMMIT, or after Postgres failed it.
const sealRetry = time.Second

// sealKey names a sealed segment.
type sealKey struct {
	stream string
	start  int64
}

// sealer seals closed segments (see docs/storage.md, Segments): once all
// of a closed segment's bytes are committed, its length and BLAKE3 go to
// sealed_segments. Its goroutine is woken by each rollover; sealing is
// off the append path, and an append waits for none of it.
type sealer struct {
	wake chan struct{}
	// mu guards sealed: written by recovery, then by the goroutine, and
	// read by Stats.
	mu     sync.Mutex
	sealed map[sealKey]segment.ID
	stop   context.CancelFunc
	done   chan struct{}
}

// isSealed reports whether the segment starting at start of stream is
// sealed.
func (s *sealer) isSealed(stream string, start int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.sealed[sealKey{stream, start}]
	return ok
}

// markSealed records that segment id of stream is sealed.
func (s *sealer) markSealed(stream string, id segment.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sealed[sealKey{stream, id.Start}] = id
}

func newSealer() *sealer {
	return &sealer{wake: make(chan struct{}, 1), sealed: map[sealKey]segment.ID{}}
}

// onRollover is the files' segment.Options.OnRollover: it runs with a
// writer's lock held, so it only wakes the sealer.
func (e *Engine) onRollover(segment.Info) {
	select {
	case e.sealer.wake <- struct{}{}:
	default:
	}
}

// checkSealed is recovery's check of the sealed segments against the
// files: each must be there, closed, of its generation and length. A
// missing or changed sealed segment lost committed bytes (its BLAKE3 is
// checked by cardbox verify, which reads every byte).
func (e *Engine) checkSealed(ctx context.Context) error {
	rows, err := e.as(pgrole.Recovery, "").ListSealedSegments(ctx, e.storeID)
	if err != nil {
		return fmt.Errorf("list sealed segments: %w", err)
	}
	files := map[string][]segment.Info{streamBlobs: e.blobs.Segments(), streamTurns: e.turns.Segments()}
	for _, r := range rows {
		segs := files[r.Stream]
		if err := checkSealedSegment(r, segs); err != nil {
			return fmt.Errorf("%w: committed bytes are missing; refusing to start; %s, and %s", err, adviceVerify, adviceBackup)
		}
		e.sealer.markSealed(r.Stream, segment.ID{Start: r.StartOffset, Gen: uint32(r.Generation)})
	}
	return nil
}

func checkSealedSegment(r storedb.ListSealedSegmentsRow, segs []segment.Info) error {
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

// startSealer starts the goroutine that seals closed segments, and has it
// look at once: a process that died between a rollover and the seal left
// a closed segment to seal.
func (e *Engine) startSealer() {
	ctx, cancel := context.WithCancel(context.Background())
	e.sealer.stop, e.sealer.done = cancel, make(chan struct{})
	e.onRollover(segment.Info{})
	go e.sealLoop(ctx)
}

// stopSealer stops the goroutine, abandoning a seal in progress: the next
// start seals it.
func (e *Engine) stopSealer() {
	if e.sealer.stop == nil {
		return
	}
	e.sealer.stop()
	<-e.sealer.done
}

func (e *Engine) sealLoop(ctx context.Context) {
	defer close(e.sealer.done)
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.sealer.wake:
		case <-retry:
		}
		retry = nil
		pending, err := e.sealCommitted(ctx)
		if err != nil && ctx.Err() == nil {
			e.log.Warn("sealing segments failed; trying again", "err", err)
		}
		if pending || err != nil {
			retry = time.After(sealRetry)
		}
	}
}

// sealCommitted seals every closed segment whose bytes are all committed
// and reports whether a closed one is left waiting for a COMMIT.
func (e *Engine) sealCommitted(ctx context.Context) (pending bool, err error) {
	q := e.as(pgrole.Recovery, "")
	state, err := q.GetTurnLogState(ctx)
	if err != nil {
		return true, fmt.Errorf("read the committed ends: %w", err)
	}
	for _, s := range []struct {
		stream    string
		closed    []segment.Info
		committed int64
	}{
		{streamBlobs, e.blobs.Closed(), state.PackEnd},
		{streamTurns, e.turns.Closed(), state.CommittedEnd},
	} {
		for _, seg := range s.closed {
			if e.sealer.isSealed(s.stream, seg.ID.Start) {
				continue
			}
			if seg.End() > s.committed {
				pending = true
				continue
			}
			if err := e.seal(ctx, q, s.stream, seg); err != nil {
				return true, err
			}
			e.sealer.markSealed(s.stream, seg.ID)
		}
	}
	return pending, nil
}

// seal hashes a closed, committed segment and records it.
func (e *Engine) seal(ctx context.Context, q *storedb.Queries, stream string, seg segment.Info) error {
	sum, n, err := segment.Sum(ctx, seg.Path)
	if err != nil {
		return err
	}
	if n != seg.Length {
		return fmt.Errorf("seal %s: %d bytes on disk, closed at %d", seg.Path, n, seg.Length)
	}
	err = q.SealSegment(ctx, storedb.SealSegmentParams{
		StoreID: e.storeID, Stream: stream, StartOffset: seg.ID.Start,
		Generation: int32(seg.ID.Gen), Length: seg.Length, Blake3: sum[:],
	})
	if err != nil {
		return fmt.Errorf("seal %s: %w", seg.Path, err)
	}
	e.log.Info("segment sealed", "file", seg.Path, "bytes", seg.Length)
	return nil
}

// The states of a segment SegmentStats counts: sealed (closed, its bytes
// all committed and recorded in sealed_segments), closed (not written
// any more, waiting for its last group's COMMIT or for the sealer), and
// active (the one appends write).
const (
	SegmentSealed = "sealed"
	SegmentClosed = "closed"
	SegmentActive = "active"
)

// SegmentStats counts the segments of one file in one state.
type SegmentStats struct {
	// File is FileBlobs or FileTurns; State is SegmentSealed,
	// SegmentClosed or SegmentActive.
	File, State string
	Count       int
	// Bytes are the stream's bytes the segments hold: the active
	// segment's up to the file's data end, without its reservation.
	Bytes int64
}

// segmentStats counts the segments of both files by state, every state
// of each file listed, in a fixed order.
func (e *Engine) segmentStats(packEnd, logEnd int64) []SegmentStats {
	var out []SegmentStats
	for _, f := range []struct {
		stream string
		segs   []segment.Info
		end    int64
	}{
		{streamBlobs, e.blobs.Segments(), packEnd},
		{streamTurns, e.turns.Segments(), logEnd},
	} {
		sealed := SegmentStats{File: f.stream, State: SegmentSealed}
		closed := SegmentStats{File: f.stream, State: SegmentClosed}
		active := SegmentStats{File: f.stream, State: SegmentActive}
		for i, seg := range f.segs {
			switch {
			case i == len(f.segs)-1:
				active.Count, active.Bytes = 1, max(0, f.end-seg.ID.Start)
			case e.sealer.isSealed(f.stream, seg.ID.Start):
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

// settleGenerations removes, of two generations of one segment, the file
// sealed_segments does not name (docs/storage.md, Segments): a compaction
// killed before its swap committed leaves its rewrite, the next
// generation, beside the sealed one; killed after it, the old generation
// beside the rewrite Postgres now names, which was fsynced before the
// swap. Postgres decides which one the stream holds, as it decides
// which turns exist. Generations of a segment that is not sealed, or
// sealed as neither, are left as they are: opening the files then
// refuses them, naming both.
func (e *Engine) settleGenerations(ctx context.Context) error {
	rows, err := e.as(pgrole.Recovery, "").ListSealedSegments(ctx, e.storeID)
	if err != nil {
		return fmt.Errorf("list sealed segments: %w", err)
	}
	named := map[sealKey]uint32{}
	for _, r := range rows {
		named[sealKey{r.Stream, r.StartOffset}] = uint32(r.Generation)
	}
	for _, f := range []struct {
		stream string
		layout segment.Layout
	}{
		{streamBlobs, blobpack.Layout(BlobDir(e.opts.Dir))},
		{streamTurns, turnlog.Layout(TurnLogPath(e.opts.Dir))},
	} {
		ids, err := f.layout.All()
		if err != nil {
			return err
		}
		removed := false
		for i, j := 0, 0; i < len(ids); i = j {
			for j = i + 1; j < len(ids) && ids[j].Start == ids[i].Start; j++ {
			}
			gen, sealed := named[sealKey{f.stream, ids[i].Start}]
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
				e.log.Info("segment generation removed: sealed_segments names another",
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
