package putmemo

import (
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/ident"
)

func TestMemo(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	h1, h2, h3 := ident.Hash{1}, ident.Hash{2}, ident.Hash{3}
	const within = time.Hour
	tests := []struct {
		name   string
		max    int
		steps  func(m *Memo)
		tenant uint32
		hash   ident.Hash
		now    time.Time
		want   bool
		len    int
	}{
		{"never noted", 4, func(*Memo) {}, 1, h1, t0, false, 0},
		{"noted now", 4, func(m *Memo) { m.Note(1, h1, t0, within) }, 1, h1, t0, true, 1},
		{"just fresh", 4, func(m *Memo) { m.Note(1, h1, t0, within) }, 1, h1, t0.Add(within - 1), true, 1},
		{"stale", 4, func(m *Memo) { m.Note(1, h1, t0, within) }, 1, h1, t0.Add(within), false, 1},
		{"another tenant's", 4, func(m *Memo) { m.Note(1, h1, t0, within) }, 2, h1, t0, false, 1},
		{"a later note wins", 4, func(m *Memo) { m.Note(1, h1, t0, within); m.Note(1, h1, t0.Add(within), within) }, 1, h1, t0.Add(within), true, 1},
		{"an earlier note loses", 4, func(m *Memo) { m.Note(1, h1, t0.Add(within), within); m.Note(1, h1, t0, within) }, 1, h1, t0.Add(within), true, 1},
		{"full: stale ones go", 2, func(m *Memo) {
			m.Note(1, h1, t0, within)
			m.Note(1, h2, t0.Add(within/2), within)
			m.Note(1, h3, t0.Add(within), within)
		}, 1, h3, t0.Add(within), true, 2},
		{"full of fresh ones: not noted", 2, func(m *Memo) {
			m.Note(1, h1, t0, within)
			m.Note(1, h2, t0, within)
			m.Note(1, h3, t0, within)
		}, 1, h3, t0, false, 2},
		{"full of fresh ones, then one stale", 2, func(m *Memo) {
			m.Note(1, h1, t0, within)
			m.Note(1, h2, t0.Add(within/2), within)
			m.Note(1, h3, t0.Add(within/4), within) // full: h1 fresh till t0+within
			m.Note(1, h3, t0.Add(within), within)   // h1 stale now
		}, 1, h3, t0.Add(within), true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(tt.max)
			tt.steps(m)
			if got := m.Fresh(tt.tenant, tt.hash, tt.now, within); got != tt.want {
				t.Errorf("fresh = %v, want %v", got, tt.want)
			}
			if m.Len() != tt.len {
				t.Errorf("%d entries, want %d", m.Len(), tt.len)
			}
		})
	}
}
