package layout

// MovedEntry is an entry in both sides of a diff whose zone, position or
// draft flag differ.
type MovedEntry struct {
	From, To Entry
}

// Diff is what changed from one state of a box to another, by entry id.
type Diff struct {
	Added   []Entry
	Removed []Entry
	Changed []MovedEntry
}

// DiffEntries compares the entries a with b.
func DiffEntries(a, b []Entry) Diff {
	d := Diff{Added: []Entry{}, Removed: []Entry{}, Changed: []MovedEntry{}}
	inA := make(map[string]Entry, len(a))
	for _, e := range a {
		inA[e.EntryID] = e
	}
	inB := make(map[string]bool, len(b))
	for _, e := range b {
		inB[e.EntryID] = true
		old, ok := inA[e.EntryID]
		switch {
		case !ok:
			d.Added = append(d.Added, e)
		case old != e:
			d.Changed = append(d.Changed, MovedEntry{From: old, To: e})
		}
	}
	for _, e := range a {
		if !inB[e.EntryID] {
			d.Removed = append(d.Removed, e)
		}
	}
	return d
}
