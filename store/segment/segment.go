package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/zeebo/blake3"
)

// ErrCorrupt is a stream whose segment files do not fit together. Errors
// of this package wrap it with the files at fault; test with errors.Is.
var ErrCorrupt = errors.New("segments do not fit together")

// ErrGap is a read of bytes in the gap after a rewritten segment: a
// compaction packs a segment's records at the start of its range, and
// the rest of the range holds nothing.
var ErrGap = errors.New("offset in the gap after a rewritten segment")

// ID names a segment: the logical offset of its first byte, and the
// generation of its file (0 as written by appends; a rewrite of the
// segment, by a compaction, takes the next).
type ID struct {
	Start int64
	Gen   uint32
}

// Layout names the segment files of one stream: those in Dir whose name
// is Base (the segment at offset 0, generation 0) or starts with Base and
// a dot followed by a segment's start and generation.
type Layout struct {
	Dir  string
	Base string // "blobs.pack", "turns.log"
}

// Name returns the file name of segment id (without the directory).
func (l Layout) Name(id ID) string {
	if id == (ID{}) {
		return l.Base
	}
	return fmt.Sprintf("%s.%016x.%d", l.Base, id.Start, id.Gen)
}

// Path returns the path of segment id.
func (l Layout) Path(id ID) string { return filepath.Join(l.Dir, l.Name(id)) }

// Parse returns the segment a file name names. Only the names Name
// returns parse: a name of this stream in any other spelling (a backup
// copy, a rewrite in progress) is not a segment.
func (l Layout) Parse(name string) (ID, bool) {
	if name == l.Base {
		return ID{}, true
	}
	rest, ok := strings.CutPrefix(name, l.Base+".")
	if !ok {
		return ID{}, false
	}
	startHex, genDec, ok := strings.Cut(rest, ".")
	if !ok || len(startHex) != 16 {
		return ID{}, false
	}
	start, err := strconv.ParseInt(startHex, 16, 64)
	if err != nil || start < 0 {
		return ID{}, false
	}
	gen, err := strconv.ParseUint(genDec, 10, 32)
	if err != nil {
		return ID{}, false
	}
	id := ID{Start: start, Gen: uint32(gen)}
	if l.Name(id) != name {
		return ID{}, false // "+1", leading zeros, upper-case hex: not ours
	}
	return id, true
}

// List returns the segments in the layout's directory, by start offset.
// A missing directory holds none. Two generations of one segment are an
// error wrapping ErrCorrupt: see All.
func (l Layout) List() ([]ID, error) {
	ids, err := l.All()
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(ids); i++ {
		if ids[i].Start == ids[i-1].Start {
			return nil, fmt.Errorf("segment: %s and %s both hold the bytes from %d: %w",
				l.Path(ids[i-1]), l.Path(ids[i]), ids[i].Start, ErrCorrupt)
		}
	}
	return ids, nil
}

// All returns every segment file in the layout's directory, by start
// offset and generation, two generations of one segment included (what
// a compaction killed between writing a rewrite and removing the older
// file leaves: the caller keeps the one its records name).
func (l Layout) All() ([]ID, error) {
	entries, err := os.ReadDir(l.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("segment: list %s: %w", l.Dir, err)
	}
	var ids []ID
	for _, e := range entries {
		if id, ok := l.Parse(e.Name()); ok && e.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b ID) int {
		if a.Start != b.Start {
			return int(min(max(a.Start-b.Start, -1), 1))
		}
		return int(int64(a.Gen) - int64(b.Gen))
	})
	return ids, nil
}

// Info describes a segment file.
type Info struct {
	ID     ID
	Path   string
	Length int64 // bytes of the stream it holds
}

// End is the logical offset just past the segment.
func (i Info) End() int64 { return i.ID.Start + i.Length }

// Sum reads the file at path and returns its BLAKE3-256 and its length:
// what a sealed segment is recorded with and checked against.
func Sum(ctx context.Context, path string) (sum [32]byte, length int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return sum, 0, fmt.Errorf("segment: sum: %w", err)
	}
	defer f.Close()
	h := blake3.New()
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return sum, 0, fmt.Errorf("segment: sum %s: %w", path, err)
		}
		n, err := f.Read(buf)
		_, _ = h.Write(buf[:n]) // a hash.Hash never fails
		length += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sum, 0, fmt.Errorf("segment: sum %s: %w", path, err)
		}
	}
	copy(sum[:], h.Sum(nil))
	return sum, length, nil
}
