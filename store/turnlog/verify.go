package turnlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/syncfile"
)

// Defect is a damaged record of the log found by Scan.
type Defect struct {
	Offset int64
	Reason string
}

// Scan reads every record of the log whose first segment is path, over
// all its segments, read-only. visit gets each
// valid record with its offset; a bad record is a Defect, and since
// records have a fixed size the scan goes on at the next one. Zeros from a
// record boundary to the end are the reservation and end the scan. It
// returns where the records end.
func Scan(path string, visit func(off int64, r Record)) (end int64, defects []Defect, err error) {
	set, err := segment.Open(Layout(path), segment.Options{ReadOnly: true})
	if err != nil {
		return 0, nil, fmt.Errorf("turnlog: scan: %w", err)
	}
	defer set.Close()
	size := set.Size()
	var b [RecordSize]byte
	var zero [RecordSize]byte
	segs := set.Segments()
	for i, seg := range segs {
		if i > 0 {
			// A rewritten segment may end before the next starts: its
			// records are packed at the start of its range, and the
			// rest of the range, a gap, holds nothing. The log's records
			// go on at the next segment, empty as it may be.
			end = max(end, seg.ID.Start)
		}
		from, to := seg.ID.Start, min(seg.End(), size)
		r := bufio.NewReaderSize(io.NewSectionReader(set, from, to-from), 1<<20)
		for off := from; off < to; off += RecordSize {
			n, err := io.ReadFull(r, b[:])
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return off, append(defects, Defect{off, fmt.Sprintf("partial record (%d bytes)", n)}), nil
			}
			if err != nil {
				return off, defects, fmt.Errorf("turnlog: scan %s at %d: %w", path, off, err)
			}
			if bytes.Equal(b[:], zero[:]) {
				if rest, err := set.ZeroTail(off, size); err == nil && rest {
					return off, defects, nil
				}
			}
			rec, err := UnmarshalRecord(b[:])
			if err != nil {
				defects = append(defects, Defect{off, err.Error()})
				continue
			}
			if visit != nil {
				visit(off, rec)
			}
			end = off + RecordSize
		}
	}
	return end, defects, nil
}

// Rebuild writes a new log at path from the records next returns, in
// order, and puts it in place durably: a temporary file is written and
// fsynced, the old log's segments (if any) are kept as <name>.bak (or
// .bak-<n>), the last first, the new log, one segment, is renamed into
// place and the directory fsynced. It returns the new size and the name
// the old first segment is kept under ("" when there was no old log).
func Rebuild(path string, next func() (Record, bool, error)) (size int64, backup string, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, "", fmt.Errorf("turnlog: rebuild: %w", err)
	}
	tmp := path + ".rebuild"
	if size, err = writeRecords(tmp, next); err != nil {
		os.Remove(tmp)
		return 0, "", err
	}
	if backup, err = keepSegments(Layout(path)); err != nil {
		return 0, "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, backup, fmt.Errorf("turnlog: rebuild: %w", err)
	}
	return size, backup, syncfile.Dir(dir)
}

// keepSegments renames the log's segments out of the way, the last first
// (so that a crash in between leaves contiguous segments), and returns
// the first one's new name.
func keepSegments(layout segment.Layout) (string, error) {
	ids, err := layout.List()
	if err != nil {
		return "", fmt.Errorf("turnlog: rebuild: %w", err)
	}
	var first string
	for i := len(ids) - 1; i >= 0; i-- {
		old := layout.Path(ids[i])
		kept := freeName(old + ".bak")
		if err := os.Rename(old, kept); err != nil {
			return "", fmt.Errorf("turnlog: rebuild: keep the old log: %w", err)
		}
		first = kept
	}
	return first, nil
}

func writeRecords(path string, next func() (Record, bool, error)) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("turnlog: rebuild: %w", err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	var b [RecordSize]byte
	var size int64
	for {
		rec, ok, err := next()
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		rec.MarshalTo(b[:])
		if _, err := w.Write(b[:]); err != nil {
			return 0, fmt.Errorf("turnlog: rebuild: %w", err)
		}
		size += RecordSize
	}
	if err := w.Flush(); err != nil {
		return 0, fmt.Errorf("turnlog: rebuild: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("turnlog: rebuild: %w", err)
	}
	return size, f.Close()
}

// freeName returns base, or base-2, base-3, ... whichever does not exist.
func freeName(base string) string {
	name := base
	for i := 2; ; i++ {
		if _, err := os.Stat(name); errors.Is(err, os.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}
