package turnlog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// visited collects what Open visits.
type visited struct {
	offs []int64
	recs []Record
}

func (v *visited) visit(off int64, r Record) error {
	v.offs = append(v.offs, off)
	v.recs = append(v.recs, r)
	return nil
}

func openLog(t testing.TB, path string, opts Options) (*Log, *visited) {
	t.Helper()
	var v visited
	l, err := Open(path, opts, v.visit)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { l.Close() })
	return l, &v
}

func keepAll(min int64) Options { return Options{MinValidSize: min, TruncateAt: NoTruncate} }

func records(from, n uint64) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = sampleRecord(from + uint64(i))
	}
	return recs
}

func appendRecs(t testing.TB, l *Log, recs []Record) int64 {
	t.Helper()
	off, err := l.Append(recs)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return off
}

func closeLog(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// checkVisited fails unless v holds exactly recs at offsets 0, 128, ...
func checkVisited(t testing.TB, v *visited, recs []Record) {
	t.Helper()
	if len(v.recs) != len(recs) {
		t.Fatalf("visited %d records, want %d", len(v.recs), len(recs))
	}
	for i := range recs {
		if v.offs[i] != int64(i)*RecordSize || v.recs[i] != recs[i] {
			t.Fatalf("visit %d = %d %+v, want %d %+v", i, v.offs[i], v.recs[i], i*RecordSize, recs[i])
		}
	}
}

func fileBytes(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newLogFile writes recs to a fresh log with separate appends of up to 3
// records and returns its path.
func newLogFile(t testing.TB, recs []Record) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "turns.log")
	l, _ := openLog(t, path, keepAll(0))
	for i := 0; i < len(recs); i += 3 {
		appendRecs(t, l, recs[i:min(i+3, len(recs))])
	}
	closeLog(t, l)
	return path
}

// withBytes writes b to a fresh file and returns its path.
func withBytes(t testing.TB, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "turns.log")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAppendReadReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "turns.log")
	l, v := openLog(t, path, keepAll(0))
	if l.Size() != 0 || len(v.recs) != 0 {
		t.Fatalf("new log: size %d, %d records", l.Size(), len(v.recs))
	}
	all := records(0, 10)
	for _, batch := range [][]Record{all[:1], all[1:7], nil, all[7:]} {
		want := l.Size()
		if off := appendRecs(t, l, batch); off != want {
			t.Fatalf("Append at %d, want %d", off, want)
		}
	}
	if l.Size() != int64(len(all))*RecordSize {
		t.Fatalf("Size = %d, want %d", l.Size(), len(all)*RecordSize)
	}
	for i, want := range all {
		if got, err := l.ReadAt(int64(i) * RecordSize); err != nil || got != want {
			t.Fatalf("ReadAt(%d) = %+v, %v; want %+v", i*RecordSize, got, err, want)
		}
	}
	closeLog(t, l)

	l, v = openLog(t, path, keepAll(l.Size()))
	checkVisited(t, v, all)
	if r := l.Recovery(); r != (Recovery{ValidSize: int64(len(all)) * RecordSize}) {
		t.Fatalf("Recovery = %+v, want nothing cut", r)
	}
	more := records(10, 2)
	if off := appendRecs(t, l, more); off != int64(len(all))*RecordSize {
		t.Fatalf("Append after reopen at %d", off)
	}
	if got, err := l.ReadAt(off(11)); err != nil || got != more[1] {
		t.Fatalf("ReadAt after reopen = %+v, %v", got, err)
	}
}

func off(i int) int64 { return int64(i) * RecordSize }

func TestReadAtRange(t *testing.T) {
	l, _ := openLog(t, filepath.Join(t.TempDir(), "turns.log"), keepAll(0))
	appendRecs(t, l, records(0, 2))
	for _, o := range []int64{-RecordSize, 1, RecordSize + 1, 2 * RecordSize, 1 << 40} {
		if _, err := l.ReadAt(o); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("ReadAt(%d) = %v, want ErrOutOfRange", o, err)
		}
	}
}

func TestTornTail(t *testing.T) {
	all := records(0, 5)
	good := fileBytes(t, newLogFile(t, all))
	last := off(4)
	for cut := last; cut < int64(len(good)); cut++ {
		// A partial record, then the same length of garbage.
		for _, tail := range [][]byte{good[last:cut], bytes.Repeat([]byte{0xAB}, int(cut-last))} {
			path := withBytes(t, append(bytes.Clone(good[:last]), tail...))
			l, v := openLog(t, path, keepAll(last))
			checkVisited(t, v, all[:4])
			want := Recovery{ValidSize: last, TornBytes: cut - last}
			if r := l.Recovery(); r != want || l.Size() != last {
				t.Fatalf("cut at %d: Recovery = %+v, Size %d; want %+v", cut, r, l.Size(), want)
			}
			if got := int64(len(fileBytes(t, path))); got != last {
				t.Fatalf("cut at %d: file is %d bytes, want %d", cut, got, last)
			}
			if off := appendRecs(t, l, all[4:]); off != last {
				t.Fatalf("Append after cut at %d", off)
			}
			closeLog(t, l)
		}
	}
}

func TestFlippedByteInLastRecord(t *testing.T) {
	all := records(0, 5)
	good := fileBytes(t, newLogFile(t, all))
	for i := off(4); i < off(5); i++ {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		path := withBytes(t, b)
		l, v := openLog(t, path, keepAll(off(4)))
		checkVisited(t, v, all[:4])
		if r := l.Recovery(); r.TornBytes != RecordSize || l.Size() != off(4) {
			t.Fatalf("flip at %d: Recovery = %+v, Size %d", i, r, l.Size())
		}
		closeLog(t, l)
	}
}

func TestCorruptBelowMinValidSize(t *testing.T) {
	all := records(0, 6)
	good := fileBytes(t, newLogFile(t, all))
	tests := []struct {
		name   string
		bytes  func() []byte
		min    int64
		trunc  int64
		wantOK bool
	}{
		{"flip in record 1, min past it", func() []byte { return flipped(good, off(1)+9) }, off(6), NoTruncate, false},
		{"flip in record 1, min at it", func() []byte { return flipped(good, off(1)+9) }, off(1), NoTruncate, true},
		{"partial last record, min past it", func() []byte { return good[:len(good)-3] }, off(6), NoTruncate, false},
		{"log shorter than min", func() []byte { return good[:off(3)] }, off(4), NoTruncate, false},
		{"flip in record 1 with truncate", func() []byte { return flipped(good, off(1)+9) }, off(6), off(2), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.bytes()
			path := withBytes(t, before)
			var v visited
			l, err := Open(path, Options{MinValidSize: tt.min, TruncateAt: tt.trunc}, v.visit)
			if tt.wantOK {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				checkVisited(t, &v, all[:1])
				closeLog(t, l)
				return
			}
			if !errors.Is(err, ErrCorrupt) {
				if err == nil {
					l.Close()
				}
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
			if !bytes.Equal(fileBytes(t, path), before) {
				t.Fatal("failed Open modified the file")
			}
		})
	}
}

func flipped(b []byte, i int64) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x01
	return b
}

func TestTruncateAt(t *testing.T) {
	all := records(0, 6)
	good := fileBytes(t, newLogFile(t, all))
	torn := append(bytes.Clone(good), 1, 2, 3)
	tests := []struct {
		name     string
		file     []byte
		opts     Options
		wantSize int64 // -1: Open fails and leaves the file alone
	}{
		{"keep", good, Options{TruncateAt: NoTruncate}, off(6)},
		{"at end", good, Options{TruncateAt: off(6)}, off(6)},
		{"drop tail", good, Options{MinValidSize: off(2), TruncateAt: off(4)}, off(4)},
		{"zero value empties", good, Options{}, 0},
		{"torn tail and drop", torn, Options{MinValidSize: off(2), TruncateAt: off(3)}, off(3)},
		{"misaligned", good, Options{TruncateAt: off(3) + 1}, -1},
		{"below min valid size", good, Options{MinValidSize: off(4), TruncateAt: off(3)}, -1},
		{"past verified end", torn, Options{TruncateAt: off(7)}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := withBytes(t, tt.file)
			var v visited
			l, err := Open(path, tt.opts, v.visit)
			if tt.wantSize < 0 {
				if err == nil {
					l.Close()
					t.Fatal("Open succeeded")
				}
				if !bytes.Equal(fileBytes(t, path), tt.file) {
					t.Fatal("failed Open modified the file")
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { l.Close() })
			n := tt.wantSize / RecordSize
			checkVisited(t, &v, all[:n])
			if l.Size() != tt.wantSize || int64(len(fileBytes(t, path))) != tt.wantSize {
				t.Fatalf("Size = %d, file %d bytes; want %d", l.Size(), len(fileBytes(t, path)), tt.wantSize)
			}
			if r := l.Recovery(); r.ValidSize-r.DroppedBytes != tt.wantSize {
				t.Fatalf("Recovery = %+v", r)
			}
		})
	}
}

func TestTruncateRollback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "turns.log")
	l, _ := openLog(t, path, keepAll(0))
	committed := records(0, 4)
	appendRecs(t, l, committed)
	failed := appendRecs(t, l, records(100, 3))
	if err := l.Truncate(failed); err != nil {
		t.Fatalf("Truncate: %v", err)
	}
	if l.Size() != failed {
		t.Fatalf("Size = %d after Truncate(%d)", l.Size(), failed)
	}
	if _, err := l.ReadAt(failed); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("ReadAt of a cut record = %v, want ErrOutOfRange", err)
	}
	for _, bad := range []int64{-RecordSize, failed + RecordSize, failed - 1} {
		if err := l.Truncate(bad); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Truncate(%d) = %v, want ErrOutOfRange", bad, err)
		}
	}
	next := records(4, 2)
	if at := appendRecs(t, l, next); at != failed {
		t.Fatalf("Append after rollback at %d, want %d", at, failed)
	}
	closeLog(t, l)
	_, v := openLog(t, path, keepAll(off(6)))
	checkVisited(t, v, append(committed, next...))
}

func TestVisitError(t *testing.T) {
	path := newLogFile(t, records(0, 4))
	before := fileBytes(t, path)
	stop := errors.New("stop")
	_, err := Open(path, Options{TruncateAt: off(1)}, func(off int64, _ Record) error {
		if off == 0 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Open = %v, want the visit error", err)
	}
	if !bytes.Equal(fileBytes(t, path), before) {
		t.Fatal("failed Open modified the file")
	}
}

func TestClosed(t *testing.T) {
	l, _ := openLog(t, filepath.Join(t.TempDir(), "turns.log"), keepAll(0))
	appendRecs(t, l, records(0, 1))
	closeLog(t, l)
	if err := l.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := l.Append(records(1, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Append = %v, want ErrClosed", err)
	}
	if err := l.Truncate(0); !errors.Is(err, ErrClosed) {
		t.Errorf("Truncate = %v, want ErrClosed", err)
	}
	if _, err := l.ReadAt(0); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadAt = %v, want ErrClosed", err)
	}
}

func TestOpenLocks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("flock is used on Linux only")
	}
	path := filepath.Join(t.TempDir(), "turns.log")
	openLog(t, path, keepAll(0))
	if l, err := Open(path, keepAll(0), nil); err == nil {
		l.Close()
		t.Fatal("second Open of a locked log succeeded")
	}
}

func TestConcurrentReadAtDuringAppend(t *testing.T) {
	l, _ := openLog(t, filepath.Join(t.TempDir(), "turns.log"), keepAll(0))
	const batches, perBatch = 100, 16
	done := make(chan struct{})
	errc := make(chan error, 4)
	var reads atomic.Int64
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for {
				select {
				case <-done:
					return
				default:
				}
				n := l.Size() / RecordSize
				if n == 0 {
					continue
				}
				i := rng.Int64N(n)
				got, err := l.ReadAt(i * RecordSize)
				if err == nil && got != sampleRecord(uint64(i)) {
					err = errors.New("ReadAt returned another record")
				}
				if err != nil {
					errc <- err
					return
				}
				reads.Add(1)
			}
		})
	}
	for b := range batches {
		appendRecs(t, l, records(uint64(b*perBatch), perBatch))
	}
	close(done)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("concurrent ReadAt: %v", err)
	}
	t.Logf("%d reads during %d appends", reads.Load(), batches)
}

func BenchmarkAppend64(b *testing.B) {
	l, _ := openLog(b, filepath.Join(b.TempDir(), "turns.log"), keepAll(0))
	recs := records(0, 64)
	b.SetBytes(64 * RecordSize)
	for b.Loop() {
		if _, err := l.Append(recs); err != nil {
			b.Fatal(err)
		}
	}
}
