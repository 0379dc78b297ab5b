package layout

import (
	"testing"
)

// FuzzEntryCursor: whatever a client sends as a cursor, reading it either
// fails with a validation error or names a page end inside the box.
func FuzzEntryCursor(f *testing.F) {
	entries := []Entry{
		{EntryID: "e1", Zone: ZonePermanent, Position: "a0"},
		{EntryID: "e2", Zone: ZoneWorking, Position: "a0"},
		{EntryID: "e3", Zone: ZoneWorking, Position: "a0V"},
	}
	for _, c := range []string{"", "2", "b2.a0V", "t0.a0", "b9.a0", "t2.", "b2.a00"} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		end, err := PageEnd(entries, cursor)
		if err != nil {
			return
		}
		if end < 0 || end > len(entries) {
			t.Fatalf("cursor %q ends a page at %d", cursor, end)
		}
	})
}
