package store

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/filefault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/blobpack"
)

// Damage to the blob pack: below its committed end nothing is
// cut, a bad record costs only its own blob, and a pack that lost
// committed blobs for no recorded reason refuses to start.

// damagedStore is a store of 300 turns, closed, ready to be damaged.
type damagedStore struct {
	*testStore
	ten      ident.Tenant
	ctxID    uint64
	turns    []AppendResult
	payloads [][]byte     // of turns
	log      *slog.Logger // of the store tryOpen opens; nil: none
}

const damageTurns = 300

func newDamagedStore(t *testing.T) *damagedStore {
	t.Helper()
	s := &damagedStore{testStore: newTestStore(t)}
	s.ten = s.defaultTenant()
	s.ctxID = s.create(s.ten, 0).ContextID
	for i := range damageTurns {
		s.add(payloadN(i))
	}
	if err := s.Engine.Close(); err != nil {
		t.Fatal(err)
	}
	return s
}

// add appends a turn with payload.
func (s *damagedStore) add(payload []byte) {
	s.turns = append(s.turns, s.append(s.ten, turnReq(s.ctxID, 0, payload)))
	s.payloads = append(s.payloads, payload)
}

func (s *damagedStore) packPath() string { return filepath.Join(blobDir(s.dir), blobpack.PackFile) }

// entry is the pack entry of turn i's payload, read with a throwaway pack.
func (s *damagedStore) entry(i int) blobpack.Entry {
	s.t.Helper()
	p, err := blobpack.Open(blobDir(s.dir), blobpack.Options{})
	if err != nil {
		s.t.Fatal(err)
	}
	defer p.Close()
	e, ok := p.Lookup(s.turns[i].ContentHash)
	if !ok {
		s.t.Fatalf("turn %d's payload is not in the pack", i)
	}
	return e
}

// tryOpen opens the store, returning the error instead of failing.
func (s *damagedStore) tryOpen() error {
	e, err := Open(context.Background(), Options{Dir: s.dir, Pool: s.pool, Logger: s.log})
	if err == nil {
		s.Engine = e
		s.t.Cleanup(func() { e.Close() })
	}
	return err
}

// readAll reads every turn's payload, one at a time (as the HTTP turn
// pages do, which keep a per-turn error), and returns the errors by turn
// index.
func (s *damagedStore) readAll() map[int]error {
	errs := map[int]error{}
	for i := range s.turns {
		payload, err := s.TurnPayload(context.Background(), s.ten, s.turns[i].TurnID)
		if err == nil && string(payload) != string(s.payloads[i]) {
			err = fmt.Errorf("turn %d read back wrong", i)
		}
		if err != nil {
			errs[i] = err
		}
	}
	return errs
}

func TestDamagedPackRecordIsAHoleNotACut(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		turn   int
		offset func(e blobpack.Entry) int64
	}{
		{"header byte of record 100", 100, func(e blobpack.Entry) int64 { return e.Offset + 12 }},
		{"magic of record 100", 100, func(e blobpack.Entry) int64 { return e.Offset }},
		{"payload byte of the last record", damageTurns - 1, func(e blobpack.Entry) int64 { return e.Offset + 60 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newDamagedStore(t)
			filefault.Flip(t, s.packPath(), tt.offset(s.entry(tt.turn)))
			before := fileSize(t, s.packPath())
			if err := s.tryOpen(); err != nil {
				t.Fatalf("open after damage: %v", err)
			}
			if after := fileSize(t, s.packPath()); after < before {
				t.Fatalf("the pack was cut from %d to %d bytes", before, after)
			}
			errs := s.readAll()
			err, ok := errs[tt.turn]
			if len(errs) != 1 || !ok {
				t.Fatalf("read errors %v, want only turn %d's", errs, tt.turn)
			}
			hash := fmt.Sprintf("%x", s.turns[tt.turn].ContentHash)
			if fault.KindOf(err) != fault.Internal || !strings.Contains(err.Error(), hash) {
				t.Fatalf("reading the damaged turn: %v, want an internal error naming blob %s", err, hash)
			}
			if s.Stats().PackHoles != 1 || s.Degraded() == "" || s.countRows("pack_holes") != 1 {
				t.Fatalf("holes: stats %d, degraded %q, rows %d; want 1 reported everywhere",
					s.Stats().PackHoles, s.Degraded(), s.countRows("pack_holes"))
			}
			// Writing the same payload again heals the blob.
			s.add(payloadN(tt.turn))
			if errs := s.readAll(); len(errs) != 0 {
				t.Fatalf("after storing the blob again: %v", errs)
			}
		})
	}
}

func TestPackThatLostCommittedBlobsRefusesToStart(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, want string
		damage     func(t *testing.T, s *damagedStore)
	}{
		{"pack cut 5 bytes short of its committed end", "cardbox verify", func(t *testing.T, s *damagedStore) {
			t.Helper()
			if err := os.Truncate(s.packPath(), s.entry(damageTurns-1).End()-5); err != nil {
				t.Fatal(err)
			}
		}},
		{"blobs directory deleted", "blobs is missing", func(t *testing.T, s *damagedStore) {
			t.Helper()
			if err := os.RemoveAll(blobDir(s.dir)); err != nil {
				t.Fatal(err)
			}
		}},
		{"turns directory deleted", "cardbox recover", func(t *testing.T, s *damagedStore) {
			t.Helper()
			if err := os.RemoveAll(filepath.Dir(turnLogPath(s.dir))); err != nil {
				t.Fatal(err)
			}
		}},
		{"pack replaced by an empty one", "committed blobs", func(t *testing.T, s *damagedStore) {
			t.Helper()
			if err := os.Truncate(s.packPath(), 0); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newDamagedStore(t)
			tt.damage(t, s)
			err := s.tryOpen()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("open = %v, want a refusal mentioning %q", err, tt.want)
			}
		})
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestTornPackTailPastTheCommittedEndIsCut(t *testing.T) {
	t.Parallel()
	s := newDamagedStore(t)
	committed := s.entry(damageTurns - 1).End()
	f, err := os.OpenFile(s.packPath(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("CBBP torn record")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := s.tryOpen(); err != nil {
		t.Fatal(err)
	}
	if errs := s.readAll(); len(errs) != 0 || s.Stats().PackBytes != committed {
		t.Fatalf("after a torn tail: errors %v, pack %d bytes, want %d", errs, s.Stats().PackBytes, committed)
	}
}
