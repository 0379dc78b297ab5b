package inflight

import "testing"

func TestQuiet(t *testing.T) {
	tests := []struct {
		name string
		run  func(tr *Tracker) bool // reports Quiet over a read
		want bool
	}{
		{"nothing in flight", func(tr *Tracker) bool {
			m := tr.Mark()
			return tr.Quiet(m)
		}, true},
		{"one ended before the mark", func(tr *Tracker) bool {
			tr.Begin()()
			m := tr.Mark()
			return tr.Quiet(m)
		}, true},
		{"one in flight at the mark", func(tr *Tracker) bool {
			end := tr.Begin()
			m := tr.Mark()
			end()
			return tr.Quiet(m)
		}, false},
		{"one begun and ended during the read", func(tr *Tracker) bool {
			m := tr.Mark()
			tr.Begin()()
			return tr.Quiet(m)
		}, false},
		{"one begun during the read, still running", func(tr *Tracker) bool {
			m := tr.Mark()
			tr.Begin()
			return tr.Quiet(m)
		}, false},
		{"an end called twice counts once", func(tr *Tracker) bool {
			end := tr.Begin()
			end()
			end()
			other := tr.Begin()
			m := tr.Mark()
			other()
			return tr.Quiet(m)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr Tracker
			if got := tt.run(&tr); got != tt.want {
				t.Errorf("Quiet = %v, want %v", got, tt.want)
			}
		})
	}
}
