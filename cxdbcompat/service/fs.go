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

// FS resolves path in the fs snapshot of turn id (its own or its nearest
// ancestor's), as spec section 7.4 describes but with every component
// taken literally and directories that are nil or empty both empty.
func (s *Service) FS(ctx context.Context, t ident.Tenant, id uint64, path string) (FSNode, error) {
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
		entries, err := s.readTree(ctx, t, tree)
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
	entries, err := s.readTree(ctx, t, tree)
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

func (s *Service) readTree(ctx context.Context, t ident.Tenant, h ident.Hash) ([]fstree.Entry, error) {
	b, err := s.readBlob(ctx, t, h, "")
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
	b, err := s.GetBlob(ctx, t, h)
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
