package turnlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cardboxhq/cardbox/store/syncfile"
)

// Defect is a damaged record of the log found by Scan.
type Defect struct {
	Offset int64
	Reason string
}

// Scan reads every record of the log at path, read-only. visit gets each
// valid record with its offset; a bad record is a Defect, and since
// records have a fixed size the scan goes on at the next one. Zeros from a
// record boundary to the end are the reservation and end the scan. It
// returns where the records end.
func Scan(path string, visit func(off int64, r Record)) (end int64, defects []Defect, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, fmt.Errorf("turnlog: scan: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, fmt.Errorf("turnlog: scan: %w", err)
	}
	size := fi.Size()
	r := bufio.NewReaderSize(f, 1<<20)
	var b [RecordSize]byte
	var zero [RecordSize]byte
	for off := int64(0); off < size; off += RecordSize {
		n, err := io.ReadFull(r, b[:])
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return off, append(defects, Defect{off, fmt.Sprintf("partial record (%d bytes)", n)}), nil
		}
		if err != nil {
			return off, defects, fmt.Errorf("turnlog: scan %s at %d: %w", path, off, err)
		}
		if bytes.Equal(b[:], zero[:]) {
			if rest, err := syncfile.ZeroTail(f, off, size); err == nil && rest {
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
	return end, defects, nil
}

// Rebuild writes a new log at path from the records next returns, in
// order, and puts it in place durably: a temporary file is written and
// fsynced, the old log (if any) is kept as path.bak-<n>, the new one is
// renamed into place and the directory fsynced. It returns the new size
// and the backup's name ("" when there was no old log).
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
	if _, err := os.Stat(path); err == nil {
		backup = freeName(path + ".bak")
		if err := os.Rename(path, backup); err != nil {
			return 0, "", fmt.Errorf("turnlog: rebuild: keep the old log: %w", err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, backup, fmt.Errorf("turnlog: rebuild: %w", err)
	}
	return size, backup, syncfile.Dir(dir)
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
