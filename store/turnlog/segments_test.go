package turnlog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cardboxhq/cardbox/store/segment"
)

// segmented is a log of 4-record segments (one batch of 3 per segment).
func segmented(o Options) Options { o.SegmentSize = 4 * RecordSize; o.Reserve = testReserve; return o }

func TestSegmentedLogReadsAndRecoversAsOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "turns.log")
	recs := records(1, 30)
	l, _ := openLog(t, path, segmented(keepAll(0)))
	for i := 0; i < len(recs); i += 3 {
		appendRecs(t, l, recs[i:i+3])
	}
	if n := len(l.Segments()); n != 10 {
		t.Fatalf("%d segments, want 10 of 3 records", n)
	}
	for i := range recs {
		if r, err := l.ReadAt(off(i)); err != nil || r != recs[i] {
			t.Fatalf("ReadAt(%d) = %+v, %v", off(i), r, err)
		}
	}
	// A rolled-back batch that reaches into a closed segment takes the
	// segments after it along.
	if err := l.Truncate(off(25)); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Segments()); n != 9 {
		t.Fatalf("after Truncate: %d segments, want 9", n)
	}
	appendRecs(t, l, recs[25:30])
	closeLog(t, l)

	// A crash during the first write into a new segment: the rollover
	// cut the active segment to its records and created the next, whose
	// write is torn. It is cut, like the single file's tail.
	active := l.Segments()[len(l.Segments())-1]
	if err := os.Truncate(active.Path, off(30)-active.ID.Start); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(Layout(path).Path(segment.ID{Start: off(30)}), []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, v := openLog(t, path, segmented(keepAll(off(30))))
	checkVisited(t, v, recs)
	if got := l.Recovery().TornBytes; got != 4 {
		t.Fatalf("TornBytes = %d, want 4", got)
	}
	closeLog(t, l)

	// The committed end inside a closed segment: everything after it is
	// cut, later segments included.
	l, v = openLog(t, path, segmented(Options{MinValidSize: off(10), TruncateAt: off(10)}))
	checkVisited(t, v, recs[:10])
	if n := len(l.Segments()); n != 4 {
		t.Fatalf("after cutting at record 10: %d segments, want 4", n)
	}
	closeLog(t, l)

	end, defects, err := Scan(path, nil)
	if err != nil || len(defects) != 0 || end != off(10) {
		t.Fatalf("Scan = %d, %v, %v; want %d, no defects", end, defects, err, off(10))
	}
}
