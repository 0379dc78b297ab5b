package daemon

import (
	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/store"
)

// DecodeFSTree is the turn store's store.FSTreeDecoder: fs tree objects
// are the CXDB protocol's, which cxdbcompat/fstree reads. Harnesses that
// open a store of their own pass it too.
func DecodeFSTree(obj []byte) ([]store.FSTreeEntry, error) {
	entries, err := fstree.Decode(obj)
	if err != nil {
		return nil, err
	}
	out := make([]store.FSTreeEntry, len(entries))
	for i, en := range entries {
		out[i] = store.FSTreeEntry{Name: en.Name, Kind: fsEntryKind(en.Kind), Hash: en.Hash, HashOK: en.HashOK}
	}
	return out, nil
}

// fsEntryKind maps an fstree kind to the store's; a kind the store does
// not know names a file, as it always has.
func fsEntryKind(k int) store.FSEntryKind {
	switch k {
	case fstree.KindDir:
		return store.FSDir
	case fstree.KindSymlink:
		return store.FSSymlink
	}
	return store.FSFile
}
