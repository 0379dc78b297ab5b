package backup

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// stream is one of the store's two append-only files as the backup sees
// it: a sequence of segment files in one directory of the data
// directory, sharing one offset space (docs/storage.md, Segments). A
// store of one segment is the single file (blobs.pack, turns.log) that
// backups of earlier versions copied, under the same name.
type stream struct {
	file   string // store.FileBlobs, store.FileTurns: as sealed_segments names it
	relDir string // its directory inside the data directory, slash-separated
	layout segment.Layout
}

// streams returns the store's two streams in the data directory dir
// (empty: only their names, for a manifest's paths).
func streams(dir string) []stream {
	return []stream{
		{store.FileBlobs, "blobs", blobpack.Layout(store.BlobDir(dir))},
		{store.FileTurns, "turns", turnlog.Layout(store.TurnLogPath(dir))},
	}
}

// committedEnd is the stream's committed end in ends.
func (s stream) committedEnd(ends Ends) int64 {
	if s.file == store.FileBlobs {
		return ends.Pack
	}
	return ends.TurnLog
}

// parsePath returns the stream and segment a manifest's file path names:
// only the data directory's segment files are backed up or restored, so
// any other path (one that climbs out of the data directory, say) is
// refused.
func parsePath(p string) (stream, segment.ID, bool) {
	dir, name := path.Split(p)
	for _, s := range streams("") {
		if dir != s.relDir+"/" {
			continue
		}
		if id, ok := s.layout.Parse(name); ok {
			return s, id, true
		}
	}
	return stream{}, segment.ID{}, false
}

// source is a segment file to back up: its bytes [ID.Start, ID.Start+size)
// of its stream.
type source struct {
	path   string // in the data directory
	rel    string // inside the data directory, slash-separated
	id     segment.ID
	size   int64
	sealed string // the BLAKE3 sealed_segments records, hex; "" if not sealed
}

// sources lists the segment files that hold the stream's bytes up to its
// committed end, each with the bytes of it to copy: all of a closed
// segment, the active one up to the end. A segment starting exactly at
// the end is listed empty, so that the restored stream ends in the
// segment the server was writing, never in a sealed one (which recovery
// refuses as the last). Of two generations of one segment (a compaction
// not finished), the one sealed_segments names is taken.
func (s stream) sources(end int64, sealed []store.SealedSegment) ([]source, error) {
	entries, err := os.ReadDir(s.layout.Dir)
	if err != nil {
		return nil, fmt.Errorf("back up the %s: %w", s.file, err)
	}
	seals := map[int64]store.SealedSegment{}
	for _, r := range sealed {
		if r.File == s.file {
			seals[r.ID.Start] = r
		}
	}
	byStart := map[int64]segment.ID{}
	for _, e := range entries {
		id, ok := s.layout.Parse(e.Name())
		if !ok || !e.Type().IsRegular() || id.Start > end {
			continue
		}
		if other, dup := byStart[id.Start]; dup {
			seal, ok := seals[id.Start]
			switch {
			case ok && seal.ID == id:
			case ok && seal.ID == other:
				continue
			default:
				return nil, fmt.Errorf("back up the %s: %s and %s both hold the bytes from %d, and neither is sealed",
					s.file, s.layout.Name(other), s.layout.Name(id), id.Start)
			}
		}
		byStart[id.Start] = id
	}
	starts := make([]int64, 0, len(byStart))
	for start := range byStart {
		starts = append(starts, start)
	}
	slices.Sort(starts)
	if len(starts) == 0 || starts[0] != 0 {
		return nil, fmt.Errorf("back up the %s: no segment at offset 0 in %s", s.file, s.layout.Dir)
	}
	out := make([]source, 0, len(starts))
	for i, start := range starts {
		stop := end
		if i+1 < len(starts) {
			stop = min(end, starts[i+1])
		}
		id := byStart[start]
		src := source{path: s.layout.Path(id), rel: s.relDir + "/" + s.layout.Name(id), id: id, size: stop - start}
		if seal, ok := seals[start]; ok && seal.ID == id && id.Gen > 0 && seal.Length < src.size {
			// A compaction's rewrite packs its records at the start of
			// its range: the rest of the range is a gap, in no file.
			src.size = seal.Length
		}
		if seal, ok := seals[start]; ok {
			if seal.ID != id || seal.Length != src.size {
				return nil, fmt.Errorf("back up the %s: sealed segment %s (%d bytes) does not match %s on disk (%d bytes)",
					s.file, s.layout.Name(seal.ID), seal.Length, src.path, src.size)
			}
			src.sealed = hex.EncodeToString(seal.BLAKE3[:])
		}
		out = append(out, src)
	}
	return out, nil
}

// checkStreams reports files that are no segment of the store's
// streams, gaps between and inside the files of each stream, and a
// stream that does not reach its committed end.
func checkStreams(files []File, ends Ends) []string {
	type placed struct {
		id segment.ID
		f  File
	}
	var problems []string
	byStream := map[string][]placed{}
	for _, f := range files {
		s, id, ok := parsePath(f.Path)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: not a segment file of a cardbox data directory", f.Path))
			continue
		}
		byStream[s.file] = append(byStream[s.file], placed{id, f})
	}
	for _, s := range streams("") {
		ps := byStream[s.file]
		slices.SortFunc(ps, func(a, b placed) int { return cmp.Compare(a.id.Start, b.id.Start) })
		var off int64
		gap := false // the last file was a compaction's rewrite: a gap may follow it
		for _, p := range ps {
			if p.id.Start != off && (!gap || p.id.Start < off) {
				problems = append(problems, fmt.Sprintf("%s: bytes %d..%d of the %s are in no file", p.f.Path, off, p.id.Start, s.file))
			}
			problems = append(problems, checkCoverage(p.f)...)
			off, gap = p.id.Start+p.f.Size, p.id.Gen > 0
		}
		if want := s.committedEnd(ends); off != want {
			problems = append(problems, fmt.Sprintf("the %s: its files end at %d, its committed end is %d", s.file, off, want))
		}
	}
	return problems
}

// checkCoverage reports gaps in a file's segments.
func checkCoverage(f File) []string {
	var problems []string
	var off int64
	for _, s := range f.Segments {
		if s.Offset != off {
			problems = append(problems, fmt.Sprintf("%s: bytes %d..%d are in no segment", f.Path, off, s.Offset))
		}
		off = s.Offset + s.Size
	}
	if off != f.Size {
		problems = append(problems, fmt.Sprintf("%s: its segments end at %d of %d bytes", f.Path, off, f.Size))
	}
	return problems
}

// fromData returns the path in the data directory dir of a manifest's
// file path.
func fromData(dir, p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
