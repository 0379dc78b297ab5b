package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/internal/damage"
)

// An fs root attached to a turn (ATTACH_FS, APPEND with an fs root) must be
// whole: every tree object and every file and symlink blob it reaches is
// stored for the tenant. A tree found whole is remembered, so that a
// snapshot re-attached turn after turn is walked once (and a new snapshot
// walks only its changed directories).

// FSEntryKind says what an entry of an fs tree object names.
type FSEntryKind int

// Kinds of fs tree entries.
const (
	FSFile    FSEntryKind = iota // a file's blob
	FSDir                        // a tree object
	FSSymlink                    // a symlink target's blob
)

// FSTreeEntry is one entry of an fs tree object, as far as the check that
// a tree is whole reads it.
type FSTreeEntry struct {
	Name   string
	Kind   FSEntryKind
	Hash   ident.Hash
	HashOK bool // the entry carries a 32-byte hash
}

// FSTreeDecoder decodes an fs tree object into its entries (none: an empty
// directory). The object format is the CXDB protocol's
// (cxdbcompat/fstree); the daemon passes its decoder in Options.FSTree,
// so that the engine does not depend on the protocol's codecs.
type FSTreeDecoder func(obj []byte) ([]FSTreeEntry, error)

// maxWholeTrees bounds the memory of whole trees; the set starts over when
// full.
const maxWholeTrees = 1 << 18

type treeKey struct {
	tenant uint32
	hash   ident.Hash
}

// wholeTrees is the set of trees found whole, per tenant.
type wholeTrees struct {
	mu sync.Mutex
	m  map[treeKey]struct{}
}

func (w *wholeTrees) has(k treeKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.m[k]
	return ok
}

func (w *wholeTrees) add(k treeKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil || len(w.m) >= maxWholeTrees {
		w.m = map[treeKey]struct{}{}
	}
	w.m[k] = struct{}{}
}

// checkFSRoot walks the tree at root and fails with fault.NotFound naming
// the first blob that is missing for the tenant.
func (e *Engine) checkFSRoot(ctx context.Context, t ident.Tenant, root ident.Hash) error {
	if err := e.checkTree(ctx, t, root, "/"); err != nil {
		return fmt.Errorf("fs root %x is not whole: %w", root, err)
	}
	return nil
}

// checkTree checks the tree object h at path and everything under it.
func (e *Engine) checkTree(ctx context.Context, t ident.Tenant, h ident.Hash, path string) error {
	k := treeKey{t.No, h}
	if e.trees.has(k) {
		return nil
	}
	if err := e.needBlob(ctx, t, h, "tree object", path); err != nil {
		return err
	}
	data, err := e.blobs.View(h)
	if err != nil {
		return e.blobReadError(err, h, "fs tree object")
	}
	if e.opts.FSTree == nil {
		return fault.New(fault.Unprocessable, "fs roots are not supported: the store was opened without an fs tree decoder")
	}
	entries, err := e.opts.FSTree(data)
	if err != nil {
		return fault.Wrap(fault.Invalid, err, "tree object %x at %s", h, path)
	}
	for _, en := range entries {
		if err := e.checkEntry(ctx, t, en, path+en.Name); err != nil {
			return err
		}
	}
	e.trees.add(k)
	return nil
}

func (e *Engine) checkEntry(ctx context.Context, t ident.Tenant, en FSTreeEntry, path string) error {
	if !en.HashOK {
		return fault.New(fault.Invalid, "entry %s has no 32-byte hash", path)
	}
	switch en.Kind {
	case FSDir:
		return e.checkTree(ctx, t, ident.Hash(en.Hash), path+"/")
	case FSSymlink:
		return e.needBlob(ctx, t, ident.Hash(en.Hash), "symlink target", path)
	}
	return e.needBlob(ctx, t, ident.Hash(en.Hash), "file", path)
}

// needBlob fails with fault.NotFound unless the tenant has blob h.
func (e *Engine) needBlob(ctx context.Context, t ident.Tenant, h ident.Hash, what, path string) error {
	ok, err := e.ownsBlob(ctx, t, h)
	if err != nil {
		return err
	}
	if !ok {
		if errors.Is(e.blobs.Has(h), blobpack.ErrDamaged) {
			return damage.ReadError(e.blobs.Has(h), h, what+" "+path)
		}
		return fault.New(fault.NotFound, "%s blob %x (%s) not found", what, h, path)
	}
	return nil
}
