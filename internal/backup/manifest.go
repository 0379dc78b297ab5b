package backup

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/store/syncfile"
)

// ManifestFile names a complete backup inside its directory. It is written
// last, durably, and replaces the previous one in one rename: a directory
// without it holds no complete backup, and a backup cut short leaves the
// previous manifest, and every file it names, untouched.
const ManifestFile = "MANIFEST.json"

// FormatVersion is the version of the backup's layout this package
// writes and reads.
const FormatVersion = 1

// Manifest describes one complete backup: what it copied, up to where,
// and the BLAKE3 of every file it holds.
type Manifest struct {
	Format  int       `json:"format"`
	StoreID string    `json:"store_id"`
	Created time.Time `json:"created_at"`
	// Took is how long the backup ran.
	Took string `json:"took"`
	// Copied is how many bytes of the files this backup copied; the rest
	// it took over from the previous backup in the same directory.
	Copied int64 `json:"copied_bytes"`
	// Committed are the committed ends the database snapshot recorded: the
	// files are copied up to them, and what lies past them in the data
	// directory was orphaned or not committed yet when the snapshot was
	// taken.
	Committed Ends `json:"committed"`
	// Turns is how many turns, of every tenant, the snapshot holds: what
	// cardbox_turns of a server started on the restored store reports.
	Turns    int64    `json:"turns"`
	Versions Versions `json:"versions"`
	Database Database `json:"database"`
	// Files are the data directory's files, each as the segments that
	// hold it, in order.
	Files []File `json:"files"`
}

// Ends are a store's committed ends, as its newest turn_log_commits row
// visible in the snapshot says.
type Ends struct {
	TurnLog    int64 `json:"turn_log_end"`
	Pack       int64 `json:"pack_end"`
	NextTurnID int64 `json:"next_turn_id"`
}

// Versions are the versions of what made the backup.
type Versions struct {
	Cardbox   string `json:"cardbox"`
	Migration int64  `json:"migration"`
	Postgres  string `json:"postgres_server"`
	PGDump    string `json:"pg_dump"`
}

// Database is the Postgres half of a backup.
type Database struct {
	// Embedded is true when the store lived in the data directory's own
	// cluster; such a backup also holds the cluster's roles.
	Embedded bool `json:"embedded"`
	// Owner is the role that owned the database's tables.
	Owner string `json:"owner"`
	// Dump is pg_dump's archive (custom format) of the database, taken in
	// the snapshot that recorded Committed.
	Dump Blob `json:"dump"`
	// Roles is pg_dumpall --roles-only of the embedded cluster (passwords
	// of analysts' SQL roles included); empty for an external database,
	// whose roles belong to its server.
	Roles *Blob `json:"roles,omitempty"`
}

// File is one file of the data directory, copied up to Size: a segment
// file of the blob pack or of the turn log (blobs/blobs.pack,
// blobs/blobs.pack.<start>.<generation>, turns/turns.log, ...), whose
// name says where in its stream it starts. Its Segments are the backup's
// own pieces of it, not the store's segments.
type File struct {
	// Path is the file's path inside the data directory.
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Segments []Segment `json:"segments"`
	// Device and Inode identify the source file: a later backup reuses
	// segments only of the same file (bytes below a committed end never
	// change, but a file rebuilt by `cardbox recover` is another file).
	Device uint64 `json:"device"`
	Inode  uint64 `json:"inode"`
	// Sealed is the BLAKE3 (hex) sealed_segments records for the file,
	// a sealed segment of the store, whose backup was checked against
	// it; empty for a file that was not sealed. A later backup takes a
	// sealed file over by its name and this hash, whatever its inode:
	// a sealed segment changes only by a compaction, which names the
	// rewrite anew.
	Sealed string `json:"sealed_blake3,omitempty"`
}

// Segment is the bytes [Offset, Offset+Size) of a file, kept in the
// backup's file Name.
type Segment struct {
	Offset int64 `json:"offset"`
	Blob
}

// Blob is a file inside the backup directory and what it must hash to.
type Blob struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	BLAKE3 string `json:"blake3"`
}

// blobs lists every file of the backup directory that m names.
func (m *Manifest) blobs() []Blob {
	var out []Blob
	for _, f := range m.Files {
		for _, s := range f.Segments {
			out = append(out, s.Blob)
		}
	}
	out = append(out, m.Database.Dump)
	if m.Database.Roles != nil {
		out = append(out, *m.Database.Roles)
	}
	return out
}

// File returns m's file at path (inside the data directory,
// slash-separated), or nil.
func (m *Manifest) File(path string) *File {
	for i := range m.Files {
		if m.Files[i].Path == path {
			return &m.Files[i]
		}
	}
	return nil
}

// ErrNotBackup is a directory that holds no complete backup.
var ErrNotBackup = errors.New("not a cardbox backup")

// ReadManifest reads dir's manifest. A directory without one wraps
// ErrNotBackup.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (no %s: never backed up to, or every backup to it was cut short)", dir, ErrNotBackup, ManifestFile)
	}
	if err != nil {
		return nil, fmt.Errorf("read the manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w: %s does not parse: %v", dir, ErrNotBackup, ManifestFile, err)
	}
	if m.Format != FormatVersion {
		return nil, fmt.Errorf("%s: backup format %d, this cardbox reads format %d", dir, m.Format, FormatVersion)
	}
	if m.StoreID == "" || m.Database.Dump.Name == "" {
		return nil, fmt.Errorf("%s: %w: %s names no store or no database dump", dir, ErrNotBackup, ManifestFile)
	}
	return &m, nil
}

// writeManifest replaces dir's manifest with m durably: a temporary file,
// fsynced, renamed over the old one, and the directory fsynced.
func writeManifest(dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, ManifestFile)
	tmp := path + tmpSuffix
	if err := writeFileSync(tmp, append(b, '\n')); err != nil {
		return fmt.Errorf("write the manifest: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write the manifest: %w", err)
	}
	return syncfile.Dir(dir)
}

func writeFileSync(path string, b []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// hashInto writes the bytes of the file at path into h.
func hashInto(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(h, f)
	return err
}

// hashFile returns the size and BLAKE3 of the file at path.
func hashFile(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := blake3.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
