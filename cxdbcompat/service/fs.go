package service

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// FSEntry is one entry of a directory listing.
type FSEntry struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // file, dir, symlink
	Mode string `json:"mode"` // octal, without a leading 0
	Size uint64 `json:"size"`
	Hash string `json:"hash"`
}

// FSListing is a directory of the fs snapshot a turn has or inherits.
type FSListing struct {
	TurnID     string    `json:"turn_id"`
	Path       string    `json:"path"`
	FSRootHash string    `json:"fs_root_hash"`
	Entries    []FSEntry `json:"entries"`
}

// FSFile is a file or symlink of a snapshot; Content is the target path
// of a symlink.
type FSFile struct {
	Entry   FSEntry
	Content []byte
}

// FSNode is what a path names: a directory (Dir set) or a file (File set).
type FSNode struct {
	Dir  *FSListing
	File *FSFile
}

// Borrow charges n bytes of working memory, the tree object about to be
// read, until release is called; an error leaves the object unread and
// fails the call.
type Borrow func(n int64) (release func(), err error)

// FS resolves path in the fs snapshot of turn id (its own or its nearest
// ancestor's), as spec section 7.4 describes but with every component
// taken literally and directories that are nil or empty both empty.
//
// Each tree object on the way (up to store.MaxPayload) is charged to
// borrow, when not nil, at its size before it is read, and released once
// decoded: the listing the answer holds is the caller's to charge. A
// file's bytes are not charged here.
func (s *Service) FS(ctx context.Context, t ident.Tenant, id uint64, path string, borrow Borrow) (FSNode, error) {
	root, _, ok, err := s.FSRoot(ctx, t, id)
	if err != nil {
		return FSNode{}, err
	}
	if !ok {
		return FSNode{}, notFound("no fs snapshot for turn %d", id)
	}
	tree, entry := root, (*fstree.Entry)(nil)
	parts := splitPath(path)
	for i, name := range parts {
		entries, err := s.readTree(ctx, t, tree, borrow)
		if err != nil {
			return FSNode{}, err
		}
		e, found := find(entries, name)
		if !found {
			return FSNode{}, notFound("path component not found: %s", name)
		}
		if i < len(parts)-1 && e.Kind != fstree.KindDir {
			return FSNode{}, unprocessable(map[string]any{"path": path}, "not a directory: %s", name)
		}
		if !e.HashOK {
			return FSNode{}, unprocessable(map[string]any{"path": path}, "entry %s has no valid hash", name)
		}
		tree, entry = ident.Hash(e.Hash), &e
	}
	if entry != nil && entry.Kind != fstree.KindDir {
		content, err := s.readBlob(ctx, t, tree, path)
		if err != nil {
			return FSNode{}, err
		}
		return FSNode{File: &FSFile{Entry: fsEntry(*entry), Content: content}}, nil
	}
	entries, err := s.readTree(ctx, t, tree, borrow)
	if err != nil {
		return FSNode{}, err
	}
	listing := &FSListing{TurnID: idString(id), Path: path, FSRootHash: hex.EncodeToString(root[:]), Entries: make([]FSEntry, len(entries))}
	for i, e := range entries {
		listing.Entries[i] = fsEntry(e)
	}
	return FSNode{Dir: listing}, nil
}

// splitPath splits on "/", dropping empty and "." components.
func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

func find(entries []fstree.Entry, name string) (fstree.Entry, bool) {
	for _, e := range entries {
		if e.Name == name {
			return e, true
		}
	}
	return fstree.Entry{}, false
}

// readTree reads and decodes a tree object, charged to borrow (when not
// nil) from before it is read until it is decoded.
func (s *Service) readTree(ctx context.Context, t ident.Tenant, h ident.Hash, borrow Borrow) ([]fstree.Entry, error) {
	release := func() {}
	defer func() { release() }()
	var room func(int64) error
	if borrow != nil {
		room = func(n int64) error {
			r, err := borrow(n)
			if err == nil {
				release = r
			}
			return err
		}
	}
	b, err := s.readBlobWithin(ctx, t, h, "", room)
	if err != nil {
		return nil, err
	}
	entries, err := fstree.Decode(b)
	if err != nil {
		return nil, fault.Wrap(fault.Unprocessable, err, "tree %x", h[:])
	}
	return entries, nil
}

func (s *Service) readBlob(ctx context.Context, t ident.Tenant, h ident.Hash, path string) ([]byte, error) {
	return s.readBlobWithin(ctx, t, h, path, nil)
}

// readBlobWithin reads a blob, asking room (when not nil) for its size
// first (store.Engine.GetBlobWithin).
func (s *Service) readBlobWithin(ctx context.Context, t ident.Tenant, h ident.Hash, path string, room func(int64) error) ([]byte, error) {
	b, err := s.GetBlobWithin(ctx, t, h, room)
	if fault.KindOf(err) == fault.NotFound {
		details := map[string]any{"blob": hex.EncodeToString(h[:])}
		if path != "" {
			details["path"] = path
		}
		return nil, &fault.Error{Kind: fault.NotFound, Message: "blob " + hex.EncodeToString(h[:]) + " not found", Details: details}
	}
	return b, err
}

func fsEntry(e fstree.Entry) FSEntry {
	kind := "file"
	switch e.Kind {
	case fstree.KindDir:
		kind = "dir"
	case fstree.KindSymlink:
		kind = "symlink"
	}
	return FSEntry{Name: e.Name, Kind: kind, Mode: strconv.FormatUint(uint64(e.Mode), 8), Size: e.Size, Hash: hex.EncodeToString(e.Hash[:])}
}
