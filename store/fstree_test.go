package store

import "github.com/cardboxhq/cardbox/cxdbcompat/fstree"

// decodeFSTree is the daemon's FSTreeDecoder (daemon.DecodeFSTree), which
// the store's own tests cannot import.
func decodeFSTree(obj []byte) ([]FSTreeEntry, error) {
	entries, err := fstree.Decode(obj)
	if err != nil {
		return nil, err
	}
	kinds := map[int]FSEntryKind{fstree.KindDir: FSDir, fstree.KindSymlink: FSSymlink}
	out := make([]FSTreeEntry, len(entries))
	for i, en := range entries {
		out[i] = FSTreeEntry{Name: en.Name, Kind: kinds[en.Kind], Hash: en.Hash, HashOK: en.HashOK}
	}
	return out, nil
}
