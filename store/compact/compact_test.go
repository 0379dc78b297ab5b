package compact_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/compact"
	"github.com/cardboxhq/cardbox/store/salvage"
	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// segmentSize makes turn-log segments of 16 records.
const segmentSize = 16 * turnlog.RecordSize

// liveTurns is how many turns the fixture's live context has.
const liveTurns = 81

// fixture is a store whose turn log spans many sealed segments, with one
// live context, one deleted (its turns dead, interleaved with the live
// context's in every segment), and what the live turns read before any
// compaction.
type fixture struct {
	t    *testing.T
	dir  string
	pool *pgxpool.Pool
	hook func(compact.Step) error

	live, dead uint64 // context ids
	// liveTurns are the live context's turns as read before compaction,
	// records their turn-log records; deadTurns the deleted context's.
	liveTurns []store.Turn
	records   map[uint64]turnlog.Record
	deadTurns []uint64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), pool: pgtest.NewPool(t)}
	e := f.open()
	defer e.Close()
	ctx := context.Background()
	ten := f.tenant(e)
	a, err := e.CreateContext(ctx, ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.CreateContext(ctx, ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	f.live, f.dead = a.ContextID, b.ContextID
	for i := range 80 {
		f.append(e, f.live, fmt.Sprintf("live %d %s", i, strings.Repeat("l", i%13)))
		// Two dead turns for each live one: most of every segment dies.
		for j := range 2 {
			f.deadTurns = append(f.deadTurns, f.append(e, f.dead, fmt.Sprintf("dead %d.%d", i, j)))
		}
	}
	// Then a segment or two of dead turns alone, which compact to
	// nothing, closed by one more live turn.
	for i := range 40 {
		f.deadTurns = append(f.deadTurns, f.append(e, f.dead, fmt.Sprintf("dead alone %d", i)))
	}
	f.append(e, f.live, "the last live turn")
	if err := e.DeleteContext(ctx, ten, f.dead, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ReapDeleted(ctx); err != nil {
		t.Fatal(err)
	}
	waitSealed(t, e)
	f.liveTurns = f.last(e)
	f.records = f.liveRecords()
	if len(f.liveTurns) != liveTurns || len(f.records) != liveTurns {
		t.Fatalf("before compaction: %d live turns, %d records", len(f.liveTurns), len(f.records))
	}
	return f
}

func (f *fixture) open() *store.Engine {
	f.t.Helper()
	// The hook reads f.hook when called, so that a test changes it
	// while the store runs (compactions run on the test's goroutine).
	hook := func(s compact.Step) error {
		if f.hook == nil {
			return nil
		}
		return f.hook(s)
	}
	e, err := store.Open(context.Background(), store.Options{
		Dir: f.dir, Pool: f.pool, SegmentSize: segmentSize, FileReserve: -1, CompactionHook: hook,
	})
	if err != nil {
		f.t.Fatalf("open the store: %v", err)
	}
	return e
}

func (f *fixture) tenant(e *store.Engine) ident.Tenant {
	f.t.Helper()
	ten, err := e.Tenant(context.Background(), ident.DefaultTenantID)
	if err != nil {
		f.t.Fatal(err)
	}
	return ten
}

func (f *fixture) append(e *store.Engine, contextID uint64, payload string) uint64 {
	f.t.Helper()
	p := []byte(payload)
	r, err := e.Append(context.Background(), f.tenant(e), &store.AppendRequest{
		ContextID: contextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
		UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
	})
	if err != nil {
		f.t.Fatalf("append to %d: %v", contextID, err)
	}
	return r.TurnID
}

// last reads every turn of the live context with its payload (GET_LAST).
func (f *fixture) last(e *store.Engine) []store.Turn {
	f.t.Helper()
	turns, err := e.Last(context.Background(), f.tenant(e), f.live, 1000, true)
	if err != nil {
		f.t.Fatalf("last turns of the live context: %v", err)
	}
	return turns
}

// liveRecords scans the turn log, offline or beside the running store,
// and returns the records of the live context's turns.
func (f *fixture) liveRecords() map[uint64]turnlog.Record {
	f.t.Helper()
	recs := map[uint64]turnlog.Record{}
	_, defects, err := turnlog.Scan(store.TurnLogPath(f.dir), func(_ int64, r turnlog.Record) {
		if r.ContextID == f.live {
			recs[r.TurnID] = r
		}
	})
	if err != nil || len(defects) > 0 {
		f.t.Fatalf("scan the turn log: %v, %v", defects, err)
	}
	return recs
}

// checkReads checks that every live turn reads as before compaction, by
// id and through GET_LAST, that its record is byte-identical, and that
// every dead turn stays unreadable.
func (f *fixture) checkReads(e *store.Engine) {
	f.t.Helper()
	ten := f.tenant(e)
	if got := f.last(e); !slices.EqualFunc(got, f.liveTurns, sameTurn) {
		f.t.Errorf("GET_LAST of the live context reads %d turns, differently from before", len(got))
	}
	for _, want := range f.liveTurns {
		got, ok := e.TurnInfo(ten, want.ID)
		want.Payload = nil
		if !ok || !sameTurn(got, want) {
			f.t.Errorf("turn %d by id: %+v, %v; want %+v", want.ID, got, ok, want)
		}
	}
	for _, id := range f.deadTurns {
		if _, ok := e.TurnInfo(ten, id); ok {
			f.t.Errorf("dead turn %d reads", id)
		}
	}
	if got := f.liveRecords(); !maps.Equal(got, f.records) {
		f.t.Errorf("the live turns' records differ from before compaction (%d, want %d)", len(got), len(f.records))
	}
}

func sameTurn(a, b store.Turn) bool {
	return a.ID == b.ID && a.ParentID == b.ParentID && a.Depth == b.Depth && a.TypeID == b.TypeID &&
		a.TypeVersion == b.TypeVersion && a.Encoding == b.Encoding && a.Compression == b.Compression &&
		a.UncompressedLen == b.UncompressedLen && a.Hash == b.Hash && string(a.Payload) == string(b.Payload) &&
		a.PayloadDamaged == b.PayloadDamaged
}

// verify runs what cardbox verify runs, on the stopped store.
func (f *fixture) verify() *salvage.Report {
	f.t.Helper()
	r, err := salvage.Verify(context.Background(), f.dir, f.pool, nil)
	if err != nil {
		f.t.Fatalf("verify: %v", err)
	}
	if !r.OK() {
		f.t.Errorf("verify: %+v", r)
	}
	return r
}

// logFiles returns the turn log's files and their sizes.
func (f *fixture) logFiles() map[string]int64 {
	f.t.Helper()
	dir := filepath.Dir(store.TurnLogPath(f.dir))
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, en := range entries {
		fi, err := en.Info()
		if err != nil {
			f.t.Fatal(err)
		}
		sizes[en.Name()] = fi.Size()
	}
	return sizes
}

func total(sizes map[string]int64) (n int64) {
	for _, s := range sizes {
		n += s
	}
	return n
}

// waitSealed waits until every closed segment of the turn log is sealed:
// the sealer works in the background.
func waitSealed(t *testing.T, e *store.Engine) {
	t.Helper()
	waitfor.True(t, "the turn log's closed segments sealed", 30*time.Second, func() bool {
		for _, s := range e.Stats().Segments {
			if s.File == store.FileTurns && s.State == store.SegmentClosed && s.Count > 0 {
				return false
			}
		}
		return true
	})
}

// Compacting every sealed segment drops the dead turns' records: the
// files shrink, every live turn reads as before (by id, GET_LAST, its
// record byte for byte), the dead ones stay unreadable, appends go on,
// and a restart and cardbox verify find the store clean.
func TestCompactTurns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before := f.logFiles()
	e := f.open()
	ctx := context.Background()
	results, err := e.CompactTurns(ctx)
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	dropped, reclaimed := 0, int64(0)
	for _, r := range results {
		dropped += r.Dropped
		reclaimed += r.Reclaimed()
		if r.Dropped > 0 && (r.New.Gen != r.Old.Gen+1 || r.After != int64(r.Records-r.Dropped)*turnlog.RecordSize) {
			t.Errorf("compaction result %+v", r)
		}
	}
	if !slices.ContainsFunc(results, func(r compact.Result) bool { return r.Dropped > 0 && r.After == 0 }) {
		t.Errorf("no segment of dead turns alone compacted to nothing: %+v", results)
	}
	if len(results) < 5 || dropped < 100 {
		t.Fatalf("%d segments compacted, %d records dropped: %+v", len(results), dropped, results)
	}
	after := f.logFiles()
	if got := total(before) - total(after); got != reclaimed || got < 100*turnlog.RecordSize {
		t.Errorf("the turn log shrank by %d bytes (%d -> %d files), the compactions say %d", got, len(before), len(after), reclaimed)
	}
	if len(after) != len(before) {
		t.Errorf("turn log files: %v before, %v after: an old generation was left", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	f.checkReads(e)

	// A second compaction finds nothing to drop; appends go on.
	again, err := e.CompactTurns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again {
		if r.Dropped > 0 || r.New != r.Old {
			t.Errorf("a second compaction rewrote %+v", r)
		}
	}
	f.append(e, f.live, "after the compaction")
	f.liveTurns = f.last(e)
	f.records = f.liveRecords()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	r := f.verify()
	if r.Records != liveTurns+1 || r.DeadRecords != len(f.deadTurns)-dropped {
		t.Errorf("verify after compaction counts %d records, %d dead, want %d and %d", r.Records, r.DeadRecords, liveTurns+1, len(f.deadTurns)-dropped)
	}
	e = f.open()
	defer e.Close()
	f.checkReads(e)
}

// errCrash stands for a kill at a step of a compaction.
var errCrash = errors.New("killed")

// A compaction killed after each of its steps: the next start keeps the
// generation Postgres names, removes the other, and every live turn
// reads as before; cardbox verify is clean; compacting again finishes.
func TestCompactionCrashes(t *testing.T) {
	t.Parallel()
	for _, step := range []compact.Step{compact.Written, compact.Synced, compact.Swapped, compact.Installed} {
		t.Run(step.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.hook = func(s compact.Step) error {
				if s == step {
					return errCrash
				}
				return nil
			}
			e := f.open()
			if _, err := e.CompactTurnSegment(context.Background(), 0); !errors.Is(err, errCrash) {
				t.Fatalf("compaction killed after %s: %v", step, err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			// Both generations of turns.log, the segment at offset 0, are
			// on disk at every step.
			rewrite := turnlog.Layout(store.TurnLogPath(f.dir)).Name(segment.ID{Start: 0, Gen: 1})
			files := f.logFiles()
			if _, ok := files[rewrite]; !ok || files["turns.log"] != segmentSize {
				t.Fatalf("killed after %s, the turn log holds %v", step, files)
			}

			f.hook = nil
			e = f.open()
			files = f.logFiles()
			_, oldThere := files["turns.log"]
			_, newThere := files[rewrite]
			if swapped := step >= compact.Swapped; oldThere == swapped || newThere != swapped {
				t.Errorf("killed after %s, the start left %v", step, slices.Sorted(maps.Keys(files)))
			}
			f.checkReads(e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			f.verify()

			e = f.open()
			defer e.Close()
			if _, err := e.CompactTurns(context.Background()); err != nil {
				t.Fatalf("compacting again: %v", err)
			}
			f.checkReads(e)
		})
	}
}

// A compaction that failed at its swap leaves its rewrite in a running
// server, Postgres naming either generation (the swap's outcome may be
// unknown to the process): the next compaction of the segment, without
// a restart, removes the rewrite and starts again, or finishes the swap.
func TestCompactionResumesWithoutRestart(t *testing.T) {
	t.Parallel()
	for _, step := range []compact.Step{compact.Synced, compact.Swapped} {
		t.Run(step.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			e := f.open()
			defer e.Close()
			f.hook = func(s compact.Step) error {
				if s == step {
					return errCrash
				}
				return nil
			}
			if _, err := e.CompactTurnSegment(context.Background(), 0); !errors.Is(err, errCrash) {
				t.Fatalf("compaction failed after %s: %v", step, err)
			}
			f.hook = nil
			res, err := e.CompactTurnSegment(context.Background(), 0)
			if err != nil {
				t.Fatalf("compacting again: %v", err)
			}
			if res.New != (segment.ID{Start: 0, Gen: 1}) {
				t.Errorf("compacting again after %s: %+v", step, res)
			}
			files := f.logFiles()
			if _, ok := files["turns.log"]; ok {
				t.Errorf("the old generation is left: %v", slices.Sorted(maps.Keys(files)))
			}
			f.checkReads(e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			f.verify()
		})
	}
}
