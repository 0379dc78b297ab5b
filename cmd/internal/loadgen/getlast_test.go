package loadgen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// chain returns n linked turn records with payloads, oldest first.
func chain(n int) []cxdbcompat.TurnRecord {
	var out []cxdbcompat.TurnRecord
	for i := range n {
		p := []byte(fmt.Sprintf("payload %d", i))
		out = append(out, cxdbcompat.TurnRecord{
			TurnID: uint64(100 + i), ParentTurnID: uint64(99 + i), Depth: uint32(5 + i),
			DeclaredTypeID: "cxdb.ConversationItem", DeclaredTypeVersion: 3, Encoding: 1,
			UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
		})
	}
	return out
}

func TestCheckTurnListAcceptsAChain(t *testing.T) {
	for _, n := range []int{1, 3, 10} {
		p := cxdbcompat.AppendTurnList(nil, chain(n))
		if got, err := checkTurnList(p, 10, true); err != nil || got != n {
			t.Fatalf("%d turns: checkTurnList = %d, %v", n, got, err)
		}
	}
}

func TestCheckTurnListRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func([]cxdbcompat.TurnRecord) []cxdbcompat.TurnRecord
		want   string
	}{
		{"no turns", func([]cxdbcompat.TurnRecord) []cxdbcompat.TurnRecord { return nil }, "0 turns"},
		{"too many", func(ts []cxdbcompat.TurnRecord) []cxdbcompat.TurnRecord { return chain(11) }, "11 turns"},
		{"broken chain", func(ts []cxdbcompat.TurnRecord) []cxdbcompat.TurnRecord { ts[2].ParentTurnID = 7; return ts }, "does not follow"},
		{"depth gap", func(ts []cxdbcompat.TurnRecord) []cxdbcompat.TurnRecord { ts[1].Depth++; return ts }, "does not follow"},
		{"no payload", func(ts []cxdbcompat.TurnRecord) []cxdbcompat.TurnRecord { ts[0].Payload = nil; return ts }, "want it whole"},
		{"compressed", func(ts []cxdbcompat.TurnRecord) []cxdbcompat.TurnRecord { ts[1].Compression = 1; return ts }, "want it whole"},
		{"wrong bytes", func(ts []cxdbcompat.TurnRecord) []cxdbcompat.TurnRecord {
			ts[2].Payload = []byte("payload X")
			return ts
		}, "content hash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := cxdbcompat.AppendTurnList(nil, tt.mutate(chain(3)))
			if _, err := checkTurnList(p, 10, true); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("checkTurnList = %v, want an error about %q", err, tt.want)
			}
		})
	}
	p := cxdbcompat.AppendTurnList(nil, chain(3))
	for n := range len(p) {
		if _, err := checkTurnList(p[:n], 10, false); err == nil {
			t.Fatalf("accepted the answer cut to %d of %d bytes", n, len(p))
		}
	}
	if _, err := checkTurnList(append(p, 0), 10, false); err == nil {
		t.Fatal("accepted a trailing byte")
	}
}
