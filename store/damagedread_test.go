package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/filefault"
	"github.com/cardboxhq/cardbox/store/blobpack"
)

// Reading a blob whose record is damaged: GET_BLOB is an internal error
// naming the blob and the damaged bytes; a window of turns holding its
// turn serves every other turn whole and marks that one.

// damageCases flip one byte of a turn's payload record, found at start
// (a hole) or only when the blob is read.
var damageCases = []struct {
	name      string
	turn      int
	offset    func(e blobpack.Entry) int64
	whileOpen bool // flipped while the store serves: found when read
	unindexed bool // blobs.idx deleted too: a hole found by scanning, its blob unknown
}{
	{"header byte of record 100, a hole found at start", 100, func(e blobpack.Entry) int64 { return e.Offset + 12 }, false, false},
	{"payload byte of the last record, a hole found at start", damageTurns - 1, func(e blobpack.Entry) int64 { return e.Offset + 60 }, false, false},
	{"payload byte of record 100, found when read", 100, func(e blobpack.Entry) int64 { return e.Offset + 60 }, true, false},
	{"payload byte of record 100 without blobs.idx, a hole found by scanning", 100, func(e blobpack.Entry) int64 { return e.Offset + 60 }, false, true},
}

// openDamaged returns a store of damageTurns turns, open, with the case's
// byte flipped, the pack entry of the damaged turn's payload as it was
// written, and what the store logs.
func openDamaged(t *testing.T, turn int, offset func(blobpack.Entry) int64, whileOpen, unindexed bool) (*damagedStore, blobpack.Entry, *syncBuffer) {
	t.Helper()
	s := newDamagedStore(t)
	logs := &syncBuffer{}
	s.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := s.entry(turn)
	if !whileOpen {
		filefault.Flip(t, s.packPath(), offset(e))
	}
	if unindexed {
		if err := os.Remove(filepath.Join(blobDir(s.dir), blobpack.IndexFile)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.tryOpen(); err != nil {
		t.Fatalf("open after damage: %v", err)
	}
	if whileOpen {
		filefault.Flip(t, s.packPath(), offset(e))
	}
	return s, e, logs
}

func TestDamagedBlobIsAnInternalErrorNamingItsBytes(t *testing.T) {
	t.Parallel()
	for _, tt := range damageCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, entry, _ := openDamaged(t, tt.turn, tt.offset, tt.whileOpen, tt.unindexed)
			h := s.turns[tt.turn].ContentHash
			hash, span := fmt.Sprintf("%x", h), fmt.Sprintf("bytes %d..%d of blobs.pack", entry.Offset, entry.End())
			// Without blobs.idx nothing in the pack says which blob the
			// hole held; the committed turn that names it does, and the
			// hole is the pack's only one whose blob is unknown.
			_, err := s.GetBlob(context.Background(), s.ten, h)
			var se *fault.Error
			if !errors.As(err, &se) || se.Kind != fault.Internal || !strings.Contains(se.Message, hash) || !strings.Contains(se.Message, span) {
				t.Fatalf("GetBlob of the damaged blob: %v; want an internal error whose message names blob %s and %s", err, hash, span)
			}
			if se.Details["blob"] != hash || se.Details["damaged_from"] != entry.Offset || se.Details["damaged_to"] != entry.End() {
				t.Fatalf("details %v, want the blob and its damaged bytes %d..%d", se.Details, entry.Offset, entry.End())
			}
			// Another tenant does not learn that the blob exists.
			_, err = s.GetBlob(context.Background(), s.tenant("other"), h)
			wantKind(t, err, fault.NotFound)
			// The per-turn read of the HTTP turn pages names it too.
			_, err = s.TurnPayload(context.Background(), s.ten, s.turns[tt.turn].TurnID)
			if fault.KindOf(err) != fault.Internal || !strings.Contains(err.Error(), span) {
				t.Fatalf("TurnPayload of the damaged turn: %v; want an internal error naming %s", err, span)
			}
			// Every other blob reads.
			for _, i := range []int{0, tt.turn - 1, damageTurns - 2} {
				if data, err := s.GetBlob(context.Background(), s.ten, s.turns[i].ContentHash); err != nil || !bytes.Equal(data, s.payloads[i]) {
					t.Fatalf("GetBlob of turn %d's payload: %q, %v", i, data, err)
				}
			}
		})
	}
}

func TestWindowWithADamagedTurnServesTheOthersAndMarksIt(t *testing.T) {
	t.Parallel()
	for _, tt := range damageCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _, logs := openDamaged(t, tt.turn, tt.offset, tt.whileOpen, tt.unindexed)
			ctx := context.Background()
			windows := []struct {
				name  string
				first int // index of the window's oldest turn
				read  func() ([]Turn, error)
			}{
				{"GET_LAST from five turns before the damaged one", tt.turn - 5, func() ([]Turn, error) {
					return s.Last(ctx, s.ten, s.ctxID, uint32(damageTurns-tt.turn+5), true)
				}},
				{"a window ending at the damaged turn", tt.turn - 9, func() ([]Turn, error) {
					if tt.turn+1 == damageTurns {
						return s.Last(ctx, s.ten, s.ctxID, 10, true)
					}
					return s.Before(ctx, s.ten, s.ctxID, s.turns[tt.turn+1].TurnID, 10, true)
				}},
			}
			for _, w := range windows {
				turns, err := w.read()
				if err != nil {
					t.Fatalf("%s: %v", w.name, err)
				}
				if len(turns) == 0 || turns[0].ID != s.turns[w.first].TurnID {
					t.Fatalf("%s: %d turns, want them from turn %d on", w.name, len(turns), w.first)
				}
				for k, got := range turns {
					i := w.first + k
					want := s.turns[i]
					if got.ID != want.TurnID || got.Depth != want.Depth || got.Hash != want.ContentHash || got.TypeID != "cxdb.ConversationItem" || got.TypeVersion != 3 {
						t.Fatalf("%s: turn %d's metadata %+v, want %+v", w.name, i, got, want)
					}
					if i == tt.turn {
						if !got.PayloadDamaged || len(got.Payload) != 0 || got.UncompressedLen != 0 || got.Compression != CompressionNone {
							t.Fatalf("%s: the damaged turn: marked %v, %d payload bytes, length %d, compression %d; want marked, empty, 0, 0",
								w.name, got.PayloadDamaged, len(got.Payload), got.UncompressedLen, got.Compression)
						}
						continue
					}
					if got.PayloadDamaged || !bytes.Equal(got.Payload, s.payloads[i]) || got.UncompressedLen != uint32(len(s.payloads[i])) {
						t.Fatalf("%s: turn %d: marked %v, payload %q; want %q", w.name, i, got.PayloadDamaged, got.Payload, s.payloads[i])
					}
				}
			}
			if n := s.Stats().DamagedTurnsServed; n != int64(len(windows)) {
				t.Fatalf("DamagedTurnsServed = %d, want %d (once per window)", n, len(windows))
			}
			id := s.turns[tt.turn].TurnID
			var warned []string
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, fmt.Sprintf("turn=%d ", id)) {
					warned = append(warned, line)
				}
			}
			if len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") || !strings.Contains(warned[0], fmt.Sprintf("%x", s.turns[tt.turn].ContentHash)) {
				t.Fatalf("logged about turn %d: %q; want one WARN naming its blob", id, warned)
			}
			// Without payloads nothing is read: the metadata is as stored.
			turns, err := s.Last(ctx, s.ten, s.ctxID, uint32(damageTurns-tt.turn), false)
			if err != nil || turns[0].ID != id || turns[0].PayloadDamaged || turns[0].UncompressedLen != uint32(len(s.payloads[tt.turn])) {
				t.Fatalf("GET_LAST without payloads: %+v, %v; want turn %d as stored", turns[0], err, id)
			}
			if n := s.Stats().DamagedTurnsServed; n != int64(len(windows)) {
				t.Fatalf("a read without payloads counted a damaged turn: %d", n)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer a logger may write from any goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
