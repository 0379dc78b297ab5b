package turnlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

const testReserve = 16 << 10

func reserved(o Options) Options { o.Reserve = testReserve; return o }

// newReservedLog writes recs to a fresh log that keeps a reservation and
// returns its path; the file ends with zeros.
func newReservedLog(t *testing.T, recs []Record) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "turns.log")
	l, _ := openLog(t, path, reserved(keepAll(0)))
	for i := 0; i < len(recs); i += 3 {
		appendRecs(t, l, recs[i:min(i+3, len(recs))])
	}
	closeLog(t, l)
	if n := int64(len(fileBytes(t, path))); n <= int64(len(recs))*RecordSize {
		t.Fatalf("file is %d bytes: no reservation after %d records", n, len(recs))
	}
	return path
}

func TestReservedLogReopensWithoutTornBytes(t *testing.T) {
	recs := records(1, 200) // 25 KB: the reservation grows more than once
	path := newReservedLog(t, recs)
	fileSize := int64(len(fileBytes(t, path)))
	end := int64(len(recs)) * RecordSize

	l, v := openLog(t, path, reserved(keepAll(end)))
	checkVisited(t, v, recs)
	if r := l.Recovery(); r != (Recovery{ValidSize: end}) || l.Size() != end {
		t.Fatalf("Recovery = %+v, Size %d; want only %d valid bytes", r, l.Size(), end)
	}
	if n := int64(len(fileBytes(t, path))); n != fileSize {
		t.Fatalf("file is %d bytes after Open, was %d: the reservation was cut", n, fileSize)
	}
	more := records(201, 5)
	if off := appendRecs(t, l, more); off != end {
		t.Fatalf("Append at %d, want %d", off, end)
	}
	closeLog(t, l)
	_, v = openLog(t, path, reserved(keepAll(end)))
	checkVisited(t, v, append(recs, more...))
}

func TestReservedLogTornTails(t *testing.T) {
	recs := records(1, 10)
	end := int64(len(recs)) * RecordSize
	valid := records(11, 1)[0]
	var rec [RecordSize]byte
	valid.MarshalTo(rec[:])
	tests := []struct {
		name  string
		write func(f *os.File) error
	}{
		{"partial record over the zeros", func(f *os.File) error { _, err := f.WriteAt(rec[:50], end); return err }},
		{"a record after a zero record", func(f *os.File) error { _, err := f.WriteAt(rec[:], end+RecordSize); return err }},
		{"one stray byte far into the zeros", func(f *os.File) error { _, err := f.WriteAt([]byte{1}, end+5000); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := newReservedLog(t, recs)
			fileSize := int64(len(fileBytes(t, path)))
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.write(f); err != nil {
				t.Fatal(err)
			}
			f.Close()
			l, v := openLog(t, path, reserved(keepAll(end)))
			checkVisited(t, v, recs)
			if r := l.Recovery(); r.ValidSize != end || r.TornBytes != fileSize-end {
				t.Fatalf("Recovery = %+v, want %d valid and %d torn bytes", r, end, fileSize-end)
			}
			if n := int64(len(fileBytes(t, path))); n != end {
				t.Fatalf("file is %d bytes, want it cut at %d", n, end)
			}
			appendRecs(t, l, records(11, 2)) // the reservation comes back
		})
	}
}

func TestReservedLogCutsUncommittedRecords(t *testing.T) {
	recs := records(1, 10)
	path := newReservedLog(t, recs)
	l, v := openLog(t, path, reserved(Options{MinValidSize: 4 * RecordSize, TruncateAt: 4 * RecordSize}))
	checkVisited(t, v, recs[:4])
	if r := l.Recovery(); r != (Recovery{ValidSize: 10 * RecordSize, DroppedBytes: 6 * RecordSize}) {
		t.Fatalf("Recovery = %+v", r)
	}
	if n := int64(len(fileBytes(t, path))); n != 4*RecordSize {
		t.Fatalf("file is %d bytes, want %d", n, 4*RecordSize)
	}
}

func TestReservedLogShorterThanCommitted(t *testing.T) {
	path := newReservedLog(t, records(1, 10))
	before := fileBytes(t, path)
	_, err := Open(path, reserved(keepAll(12*RecordSize)), nil)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
	if string(fileBytes(t, path)) != string(before) {
		t.Fatal("Open changed a log it refused")
	}
}

func TestReservedLogTruncate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "turns.log")
	l, _ := openLog(t, path, reserved(keepAll(0)))
	appendRecs(t, l, records(1, 6))
	if err := l.Truncate(2 * RecordSize); err != nil {
		t.Fatal(err)
	}
	appendRecs(t, l, records(3, 1))
	closeLog(t, l)
	_, v := openLog(t, path, reserved(keepAll(3*RecordSize)))
	checkVisited(t, v, records(1, 3))
}
