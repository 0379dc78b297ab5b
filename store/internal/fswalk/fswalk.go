// Package fswalk walks fs trees (a root's tree objects and the blobs they
// name) within a budget, for the release of blob claims: which blobs a
// dead turn's fs root reached, and which a live turn's still reaches.
package fswalk

import "github.com/cardboxhq/cardbox/internal/ident"

// Child is an entry of a tree object: another tree object, or a file's or
// symlink target's blob.
type Child struct {
	Hash ident.Hash
	Tree bool
}

// ReadTree returns the entries of tree object h.
type ReadTree func(h ident.Hash) ([]Child, error)

// Walker walks trees, each tree object once however many roots share it.
type Walker struct {
	read   ReadTree
	budget int // tree objects still to read
	seen   map[ident.Hash]struct{}
}

// New returns a walker that reads at most budget tree objects.
func New(read ReadTree, budget int) *Walker {
	return &Walker{read: read, budget: budget, seen: map[ident.Hash]struct{}{}}
}

// Walk calls visit with root and every tree object and blob under it not
// visited by an earlier Walk, and reports whether it reached them all: a
// tree object it could not read (damaged, not stored, not a tree) or the
// budget running out leaves what lies under unvisited.
func (w *Walker) Walk(root ident.Hash, visit func(h ident.Hash)) bool {
	complete := true
	stack := []ident.Hash{root}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := w.seen[h]; ok {
			continue
		}
		if w.budget <= 0 {
			return false
		}
		w.budget--
		w.seen[h] = struct{}{}
		visit(h)
		children, err := w.read(h)
		if err != nil {
			complete = false
			continue
		}
		for _, c := range children {
			if c.Tree {
				stack = append(stack, c.Hash)
				continue
			}
			if _, ok := w.seen[c.Hash]; !ok {
				w.seen[c.Hash] = struct{}{}
				visit(c.Hash)
			}
		}
	}
	return complete
}
