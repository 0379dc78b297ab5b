package usage

import (
	"testing"

	"github.com/cardboxhq/cardbox/internal/ident"
)

// Grants and released claims charge and uncharge once each, whatever is
// repeated.
func TestLedgerGrantsAndReleases(t *testing.T) {
	g := Grant{Tenant: 7, Hash: ident.Hash{1}}
	tests := []struct {
		name  string
		steps func(l *Ledger)
		want  int64
		grant bool
		rel   bool
	}{
		{"grant", func(l *Ledger) { l.Grant(g, 10); l.Grant(g, 10) }, 10, true, false},
		{"ungrant", func(l *Ledger) { l.Grant(g, 10); l.Ungrant(g, 10); l.Ungrant(g, 10) }, 0, false, false},
		{"release", func(l *Ledger) { l.Release(g, 10); l.Release(g, 10) }, -10, false, true},
		{"release then grant again", func(l *Ledger) { l.Release(g, 10); l.Grant(g, 10) }, 0, true, true},
		{"unrelease", func(l *Ledger) { l.Release(g, 10); l.Unrelease(g, 10); l.Unrelease(g, 10) }, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New()
			tt.steps(l)
			if got := l.Of(g.Tenant); got != tt.want {
				t.Errorf("charged %d, want %d", got, tt.want)
			}
			if l.Granted(g) != tt.grant || l.Released(g) != tt.rel {
				t.Errorf("granted %v released %v, want %v %v", l.Granted(g), l.Released(g), tt.grant, tt.rel)
			}
		})
	}
}
