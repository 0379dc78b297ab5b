// Package fstree captures a workspace as a CXDB filesystem snapshot: a
// Merkle tree of msgpack tree objects (entries sorted by name), file
// contents and symlink targets, each addressed by its BLAKE3-256 hash,
// byte for byte what the official CXDB Go client writes for the same
// directory.
//
// Unlike the official client, a Policy's limits are never silent: a file
// over MaxFileSize, one file too many, a directory too deep, a symlink
// cycle or an unreadable entry fails the capture with a typed error
// (errors.Is against ErrFileTooLarge, ErrTooManyFiles, ErrTooDeep,
// ErrCyclicLink; errors.As to *PolicyError for the path). Symlinks are
// recorded, not followed, unless the Policy says otherwise.
package fstree

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/sdk"
)

// Kind is the kind of a tree entry.
type Kind uint8

// Entry kinds, as the CXDB tree format numbers them.
const (
	File      Kind = 0
	Directory Kind = 1
	Symlink   Kind = 2
)

// Entry is one entry of a tree object. The msgpack tags are the CXDB
// format's; field order and widths are the official client's, so the
// bytes (and so the hashes) are the same.
type Entry struct {
	Name string   `msgpack:"1"`
	Kind Kind     `msgpack:"2"`
	Mode uint32   `msgpack:"3"`
	Size uint64   `msgpack:"4"`
	Hash [32]byte `msgpack:"5"`
}

// Policy-violation errors; the error returned wraps one of them in a
// *PolicyError.
var (
	ErrFileTooLarge = errors.New("file too large")
	ErrTooManyFiles = errors.New("too many files")
	ErrTooDeep      = errors.New("directory too deep")
	ErrCyclicLink   = errors.New("cyclic symbolic link")
)

// PolicyError says which path broke which rule.
type PolicyError struct {
	// Path is relative to the snapshot's root, with forward slashes.
	Path string
	// Err is ErrFileTooLarge, ErrTooManyFiles, ErrTooDeep or
	// ErrCyclicLink.
	Err error
	// Limit is the policy's limit that was passed (0 for cycles).
	Limit int64
}

func (e *PolicyError) Error() string {
	if e.Limit > 0 {
		return fmt.Sprintf("fstree: %s: %v (limit %d)", e.Path, e.Err, e.Limit)
	}
	return fmt.Sprintf("fstree: %s: %v", e.Path, e.Err)
}

func (e *PolicyError) Unwrap() error { return e.Err }

// Policy says what a snapshot takes. The zero Policy takes everything
// under the official client's limits.
type Policy struct {
	// ID names the policy in the turns that record a snapshot
	// (snapshot_policy_id).
	ID string
	// Include, when not empty, keeps only the files matching one of
	// these patterns (directories are always walked).
	Include []string
	// Exclude drops files and directories matching one of these
	// patterns. A pattern matches the path relative to the root (forward
	// slashes) or the base name, path.Match syntax; "dir/**" matches the
	// directory dir and all below it.
	Exclude []string
	// MaxFiles is the most regular files (100,000).
	MaxFiles int
	// MaxFileSize is the largest file in bytes (100 MiB).
	MaxFileSize int64
	// MaxDepth is the deepest directory below the root (root = 0;
	// default 64).
	MaxDepth int
	// FollowSymlinks captures what links point to instead of the links;
	// a cycle is then ErrCyclicLink.
	FollowSymlinks bool
}

func (p Policy) withDefaults() Policy {
	if p.MaxFiles <= 0 {
		p.MaxFiles = 100000
	}
	if p.MaxFileSize <= 0 {
		p.MaxFileSize = 100 << 20
	}
	if p.MaxDepth <= 0 {
		p.MaxDepth = 64
	}
	return p
}

// Stats count what a snapshot holds.
type Stats struct {
	FileCount, DirCount, SymlinkCount int
	TotalBytes                        uint64
}

// Snapshot is a captured tree. File contents stay on disk until Upload.
type Snapshot struct {
	// Root is the hash of the root tree object: the fs_root_hash.
	Root sdk.BlobHash
	// PolicyID is the ID of the Policy it was taken with.
	PolicyID string
	// Trees are the tree objects' bytes by hash.
	Trees map[sdk.BlobHash][]byte
	// Files are the files' paths by content hash.
	Files map[sdk.BlobHash]string
	// Symlinks are the link targets by hash.
	Symlinks map[sdk.BlobHash]string
	Stats    Stats
}

// Capture snapshots the directory root under policy.
func Capture(root string, policy Policy) (*Snapshot, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fstree: %w", err)
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("fstree: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("fstree: %s is not a directory", abs)
	}
	c := &capture{
		policy: policy.withDefaults(),
		snap: &Snapshot{
			PolicyID: policy.ID, Trees: map[sdk.BlobHash][]byte{},
			Files: map[sdk.BlobHash]string{}, Symlinks: map[sdk.BlobHash]string{},
		},
		onPath: map[string]bool{},
	}
	h, err := c.dir(abs, "", 0)
	if err != nil {
		return nil, err
	}
	c.snap.Root = hashHex(h)
	return c.snap, nil
}

type capture struct {
	policy Policy
	snap   *Snapshot
	// onPath holds the real paths of the directories being walked, to
	// find cycles through followed links.
	onPath map[string]bool
}

func (c *capture) dir(abs, rel string, depth int) ([32]byte, error) {
	if depth > c.policy.MaxDepth {
		return [32]byte{}, &PolicyError{Path: rel, Err: ErrTooDeep, Limit: int64(c.policy.MaxDepth)}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return [32]byte{}, fmt.Errorf("fstree: %s: %w", rel, err)
	}
	if c.onPath[real] {
		return [32]byte{}, &PolicyError{Path: rel, Err: ErrCyclicLink}
	}
	c.onPath[real] = true
	defer delete(c.onPath, real)

	des, err := os.ReadDir(abs)
	if err != nil {
		return [32]byte{}, fmt.Errorf("fstree: read directory %q: %w", rel, err)
	}
	var entries []Entry // nil when empty: the official client writes msgpack nil
	for _, de := range des {
		childRel := path.Join(rel, de.Name())
		e, keep, err := c.entry(filepath.Join(abs, de.Name()), childRel, de.Name(), depth)
		if err != nil {
			return [32]byte{}, err
		}
		if keep {
			entries = append(entries, e)
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	b, err := EncodeTree(entries)
	if err != nil {
		return [32]byte{}, fmt.Errorf("fstree: encode %q: %w", rel, err)
	}
	h := blake3.Sum256(b)
	c.snap.Trees[hashHex(h)] = b
	c.snap.Stats.DirCount++
	return h, nil
}

// entry builds the entry of one directory member; keep is false when the
// policy leaves it out.
func (c *capture) entry(abs, rel, name string, depth int) (Entry, bool, error) {
	info, err := os.Lstat(abs)
	if err != nil {
		return Entry{}, false, fmt.Errorf("fstree: %s: %w", rel, err)
	}
	if info.Mode()&fs.ModeSymlink != 0 && c.policy.FollowSymlinks {
		if info, err = os.Stat(abs); err != nil {
			if isLoop(err) {
				return Entry{}, false, &PolicyError{Path: rel, Err: ErrCyclicLink}
			}
			return Entry{}, false, fmt.Errorf("fstree: %s: %w", rel, err)
		}
	}
	if c.excluded(rel, info.IsDir()) {
		return Entry{}, false, nil
	}
	e := Entry{Name: name, Mode: uint32(info.Mode().Perm())}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(abs)
		if err != nil {
			return Entry{}, false, fmt.Errorf("fstree: %s: %w", rel, err)
		}
		e.Kind, e.Size, e.Hash = Symlink, uint64(len(target)), blake3.Sum256([]byte(target))
		c.snap.Symlinks[hashHex(e.Hash)] = target
		c.snap.Stats.SymlinkCount++
	case info.IsDir():
		h, err := c.dir(abs, rel, depth+1)
		if err != nil {
			return Entry{}, false, err
		}
		e.Kind, e.Hash = Directory, h
	case info.Mode().IsRegular():
		if !c.included(rel) {
			return Entry{}, false, nil
		}
		if err := c.file(rel, info.Size()); err != nil {
			return Entry{}, false, err
		}
		h, err := hashFile(abs)
		if err != nil {
			return Entry{}, false, fmt.Errorf("fstree: %s: %w", rel, err)
		}
		e.Kind, e.Size, e.Hash = File, uint64(info.Size()), h
		c.snap.Files[hashHex(h)] = abs
		c.snap.Stats.FileCount++
		c.snap.Stats.TotalBytes += uint64(info.Size())
	default:
		return Entry{}, false, fmt.Errorf("fstree: %s: %v is neither file, directory nor symlink", rel, info.Mode().Type())
	}
	return e, true, nil
}

// file checks one more file against the limits.
func (c *capture) file(rel string, size int64) error {
	if c.snap.Stats.FileCount >= c.policy.MaxFiles {
		return &PolicyError{Path: rel, Err: ErrTooManyFiles, Limit: int64(c.policy.MaxFiles)}
	}
	if size > c.policy.MaxFileSize {
		return &PolicyError{Path: rel, Err: ErrFileTooLarge, Limit: c.policy.MaxFileSize}
	}
	return nil
}

func isLoop(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "too many levels of symbolic links")
}

func (c *capture) excluded(rel string, isDir bool) bool {
	for _, p := range c.policy.Exclude {
		if match(p, rel) || match(p, path.Base(rel)) {
			return true
		}
		if prefix, ok := strings.CutSuffix(p, "/**"); ok && isDir && match(prefix, rel) {
			return true
		}
	}
	return false
}

func (c *capture) included(rel string) bool {
	if len(c.policy.Include) == 0 {
		return true
	}
	for _, p := range c.policy.Include {
		if match(p, rel) || match(p, path.Base(rel)) {
			return true
		}
		if prefix, ok := strings.CutSuffix(p, "/**"); ok && strings.HasPrefix(rel, prefix+"/") {
			return true
		}
	}
	return false
}

func match(pattern, name string) bool {
	ok, _ := path.Match(pattern, name)
	return ok
}

func hashFile(p string) ([32]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return [32]byte{}, err
	}
	defer f.Close()
	h := blake3.New()
	if _, err := io.Copy(h, f); err != nil {
		return [32]byte{}, err
	}
	var out [32]byte
	h.Sum(out[:0])
	return out, nil
}

// EncodeTree encodes a directory's entries (sorted by name) as the
// official client does: a msgpack array of maps keyed "1".."5"; nil
// entries encode as msgpack nil.
func EncodeTree(entries []Entry) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(entries); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeTree decodes a tree object (nil or an empty array is an empty
// directory).
func DecodeTree(b []byte) ([]Entry, error) {
	// The decoder sizes strings, byte strings and slices by the lengths
	// their headers announce; a length longer than the bytes left is a
	// lie that would have it allocate gigabytes for a few bytes of input.
	if err := checkLengths(b); err != nil {
		return nil, fmt.Errorf("fstree: decode tree: %w", err)
	}
	var entries []Entry
	if err := msgpack.Unmarshal(b, &entries); err != nil {
		return nil, fmt.Errorf("fstree: decode tree: %w", err)
	}
	return entries, nil
}

// checkLengths walks the msgpack values in b and fails on the first
// header announcing more bytes or elements than b has left (each element
// takes at least one byte), so decoding b allocates in proportion to it.
func checkLengths(b []byte) error {
	pending := uint64(1) // values still to read
	for i := 0; pending > 0; pending-- {
		left := uint64(len(b) - i)
		if pending > left {
			return fmt.Errorf("%d values announced in the last %d bytes", pending, left)
		}
		head, n, elems, err := header(b[i:])
		if err != nil {
			return err
		}
		if n > left-uint64(head) || elems > left-uint64(head) {
			return fmt.Errorf("a value at byte %d announces more than the %d bytes left", i, left)
		}
		i += head + int(n)
		pending += elems
	}
	return nil
}

// header decodes the msgpack header at the start of b: its length, the
// bytes of payload after it (n) and the values that follow it (elems).
func header(b []byte) (head int, n uint64, elems uint64, err error) {
	c := b[0]
	be := func(w int) (uint64, error) {
		if len(b) < 1+w {
			return 0, fmt.Errorf("a header cut short")
		}
		var v uint64
		for _, x := range b[1 : 1+w] {
			v = v<<8 | uint64(x)
		}
		return v, nil
	}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return 1, 0, 0, nil
	case c&0xf0 == 0x80:
		return 1, 0, 2 * uint64(c&0x0f), nil
	case c&0xf0 == 0x90:
		return 1, 0, uint64(c & 0x0f), nil
	case c&0xe0 == 0xa0:
		return 1, uint64(c & 0x1f), 0, nil
	}
	if w, ok := fixedPayload[c]; ok {
		return 1, uint64(w), 0, nil
	}
	w, ok := lengthWidth[c]
	if !ok {
		return 0, 0, 0, fmt.Errorf("byte 0x%02x starts no msgpack value", c)
	}
	v, err := be(w)
	if err != nil {
		return 0, 0, 0, err
	}
	switch c {
	case 0xc7, 0xc8, 0xc9:
		return 1 + w, v + 1, 0, nil
	case 0xdc, 0xdd:
		return 1 + w, 0, v, nil
	case 0xde, 0xdf:
		return 1 + w, 0, 2 * v, nil
	}
	return 1 + w, v, 0, nil
}

// fixedPayload is the payload size of the msgpack types of fixed size
// (floats, integers, fixext with its type byte).
var fixedPayload = map[byte]int{0xca: 4, 0xcb: 8, 0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8,
	0xd0: 1, 0xd1: 2, 0xd2: 4, 0xd3: 8, 0xd4: 2, 0xd5: 3, 0xd6: 5, 0xd7: 9, 0xd8: 17}

// lengthWidth is the width of the length field of the msgpack types that
// carry one: bin and str (bytes), ext (bytes, then a type byte), array
// (values), map (pairs).
var lengthWidth = map[byte]int{0xc4: 1, 0xc5: 2, 0xc6: 4, 0xd9: 1, 0xda: 2, 0xdb: 4,
	0xc7: 1, 0xc8: 2, 0xc9: 4, 0xdc: 2, 0xdd: 4, 0xde: 2, 0xdf: 4}

func hashHex(h [32]byte) sdk.BlobHash { return sdk.BlobHash(fmt.Sprintf("%x", h[:])) }
