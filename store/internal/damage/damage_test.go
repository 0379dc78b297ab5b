package damage

import "testing"

func TestDamagedTurnsAreLoggedOnceEach(t *testing.T) {
	var d Served
	for round := range 3 {
		for id := uint64(1); id <= maxLogged+2; id++ {
			first, capped := d.first(id)
			wantFirst := round == 0 && id <= maxLogged
			wantCapped := round == 0 && id == maxLogged+1
			if first != wantFirst || capped != wantCapped {
				t.Fatalf("round %d, turn %d: first %v, capped %v; want %v, %v", round, id, first, capped, wantFirst, wantCapped)
			}
		}
	}
}
