package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	cxdb "github.com/strongdm/ai-cxdb/clients/go"
)

// A turn whose payload lies in a damaged record of the blob pack: the
// official client's GetLast still reads the window, that turn without its
// payload and every other turn whole, whether the damaged turn is in the
// middle of the answer or last in it.
func TestOfficialGoClientReadsAWindowHoldingDamagedTurns(t *testing.T) {
	dataDir := newDataDir(t)
	s := startServerIn(t, dataDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cxdb.Dial(s.binAddr, cxdb.WithClientTag("interop"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	var payloads [][]byte
	var hashes [][32]byte
	for i := range n {
		payload := msgpackMap(fmt.Sprintf("interop damaged-pack turn %d", i))
		r, err := c.AppendTurn(ctx, &cxdb.AppendRequest{
			ContextID: head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3, Payload: payload,
		})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		payloads, hashes = append(payloads, payload), append(hashes, r.PayloadHash)
	}
	c.Close()
	s.stop()

	// Flip a byte of the stored payloads of turn 2 and of the head (small
	// payloads are stored as they are).
	damaged := map[int]bool{2: true, n - 1: true}
	pack := filepath.Join(dataDir, "blobs", "blobs.pack")
	b, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	for i := range damaged {
		at := bytes.Index(b, payloads[i])
		if at < 0 || bytes.Count(b, payloads[i]) != 1 {
			t.Fatalf("turn %d's payload is not stored once, as is, in the pack", i)
		}
		b[at+len(payloads[i])-1] ^= 0x55
	}
	if err := os.WriteFile(pack, b, 0o644); err != nil {
		t.Fatal(err)
	}

	s = startServerIn(t, dataDir, nil)
	c, err = cxdb.Dial(s.binAddr, cxdb.WithClientTag("interop"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, limit := range []uint32{n, 1, 3} {
		turns, err := c.GetLast(ctx, head.ContextID, cxdb.GetLastOptions{Limit: limit, IncludePayload: true})
		if err != nil || len(turns) != int(limit) {
			t.Fatalf("GetLast(limit %d) over damaged turns: %d turns, %v\n%s", limit, len(turns), err, s.log.String())
		}
		for j, got := range turns {
			i := n - int(limit) + j
			want := payloads[i]
			if damaged[i] {
				want = nil
			}
			if got.PayloadHash != hashes[i] || got.TypeID != "cxdb.ConversationItem" || !bytes.Equal(got.Payload, want) {
				t.Fatalf("GetLast(limit %d): turn %d: hash %x, type %q, payload %q; want %x, %q",
					limit, i, got.PayloadHash, got.TypeID, got.Payload, hashes[i], want)
			}
		}
	}
}
