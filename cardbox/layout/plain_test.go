package layout

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cardboxhq/cardbox/cardbox/position"
)

// TestPlainIsTheFirstEdit: Plain's entries are those a plain list's first
// edit made before it took keys and ids from tables: each card appended
// to its zone in list order (every key the one after the zone's last),
// ids e1, e2... in list order, then sorted into box order.
func TestPlainIsTheFirstEdit(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1000, plainTableSize + 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ids := make([]string, n)
			zones := map[string]Zone{}
			for i := range ids {
				ids[i] = fmt.Sprintf("c%d", i%(n/2+1)) // some cards twice
				zones[ids[i]] = []Zone{ZoneWorking, ZonePermanent, ZoneWorking, ZoneStable}[len(ids[i])%4]
			}
			got, err := Plain(ids, func(id string) Zone { return zones[id] })
			if err != nil {
				t.Fatal(err)
			}
			want := appendedOneByOne(t, ids, zones)
			if got.Seq != want.Seq || !slices.Equal(got.Entries, want.Entries) {
				t.Fatalf("Plain differs from appending one by one (seq %d, want %d)", got.Seq, want.Seq)
			}
		})
	}
}

func appendedOneByOne(t *testing.T, ids []string, zones map[string]Zone) *Layout {
	t.Helper()
	l := &Layout{}
	last := make([]string, len(ZoneNames))
	for _, id := range ids {
		z := zones[id]
		key, err := position.Between(last[z], "")
		if err != nil {
			t.Fatal(err)
		}
		last[z] = key
		l.Entries = append(l.Entries, Entry{EntryID: l.NewID(), CardID: id, Zone: z, Position: key})
	}
	l.Sort()
	return l
}
