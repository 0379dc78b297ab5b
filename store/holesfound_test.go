package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/filefault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store/blobpack"
)

// Damage the store finds only when it reads a record (start-up verifies
// the records of the pack's last MiB, and reads the others' headers only)
// becomes a hole like one found at start: recorded in pack_holes once,
// counted, named by every later read, found again by the next start, and
// healed by storing the blob again. And a blob the pack lost with its
// index entry is still the blob of the tenants that stored it: an
// internal error to them, not found to every other.

// packHoleRow is a row of pack_holes.
type packHoleRow struct {
	start, end int64
	hash       []byte
	reason     string
}

func (s *testStore) packHoleRows() []packHoleRow {
	s.t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT start_offset, end_offset, blob_hash, reason FROM pack_holes ORDER BY start_offset`)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	var out []packHoleRow
	for rows.Next() {
		var r packHoleRow
		if err := rows.Scan(&r.start, &r.end, &r.hash, &r.reason); err != nil {
			s.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		s.t.Fatal(err)
	}
	return out
}

// wantNamesHole fails unless err is the internal error naming blob h and
// the bytes entry's record spans.
func wantNamesHole(t *testing.T, what string, err error, h ident.Hash, entry blobpack.Entry) {
	t.Helper()
	hash, span := fmt.Sprintf("%x", h), fmt.Sprintf("bytes %d..%d of blobs.pack", entry.Offset, entry.End())
	var se *fault.Error
	if !errors.As(err, &se) || se.Kind != fault.Internal || !strings.Contains(se.Message, hash) || !strings.Contains(se.Message, span) {
		t.Fatalf("%s: %v; want an internal error naming blob %s and %s", what, err, hash, span)
	}
	if se.Details["blob"] != hash || se.Details["damaged_from"] != entry.Offset || se.Details["damaged_to"] != entry.End() {
		t.Fatalf("%s: details %v, want the blob and its damaged bytes %d..%d", what, se.Details, entry.Offset, entry.End())
	}
}

func TestDamageFoundWhenReadIsRecordedAndNamedFromThenOn(t *testing.T) {
	t.Parallel()
	s := newDamagedStore(t)
	const k = 100
	if err := s.tryOpen(); err != nil {
		t.Fatal(err)
	}
	// A payload of 2 MiB that does not compress puts record k out of the
	// last MiB, which start-up verifies: only a read finds its damage,
	// at this start and the next.
	big := make([]byte, 2<<20)
	rand.Read(big)
	s.add(big)
	if err := s.Engine.Close(); err != nil {
		t.Fatal(err)
	}
	entry, h := s.entry(k), s.turns[k].ContentHash
	logs := &syncBuffer{}
	s.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := s.tryOpen(); err != nil {
		t.Fatal(err)
	}
	filefault.Flip(t, s.packPath(), entry.Offset+60)
	if s.Stats().PackHoles != 0 || s.Degraded() != "" || len(s.packHoleRows()) != 0 {
		t.Fatalf("before the damaged record is read: %d holes, degraded %q, %d rows", s.Stats().PackHoles, s.Degraded(), len(s.packHoleRows()))
	}

	ctx := context.Background()
	_, err := s.GetBlob(ctx, s.ten, h)
	wantNamesHole(t, "GetBlob finding the damage", err, h, entry)
	want := packHoleRow{start: entry.Offset, end: entry.End(), hash: h[:]}
	recorded := func() bool {
		rows := s.packHoleRows()
		return len(rows) == 1 && rows[0].start == want.start && rows[0].end == want.end && bytes.Equal(rows[0].hash, want.hash) &&
			strings.Contains(rows[0].reason, "when read")
	}
	waitfor.True(t, "the damaged record in pack_holes", 10*time.Second, recorded)
	if s.Stats().PackHoles != 1 || !strings.Contains(s.Degraded(), "1 damaged record") {
		t.Fatalf("after the read: %d holes, degraded %q; want the hole counted", s.Stats().PackHoles, s.Degraded())
	}

	// Every later read names the hole, without recording it again.
	for range 3 {
		_, err = s.GetBlob(ctx, s.ten, h)
		wantNamesHole(t, "a later GetBlob", err, h, entry)
		_, err = s.TurnPayload(ctx, s.ten, s.turns[k].TurnID)
		wantNamesHole(t, "TurnPayload", err, h, entry)
		turns, err := s.Before(ctx, s.ten, s.ctxID, s.turns[k+1].TurnID, 3, true)
		if err != nil || len(turns) != 3 || !turns[2].PayloadDamaged || turns[1].PayloadDamaged {
			t.Fatalf("a window ending at the damaged turn: %+v, %v", turns, err)
		}
	}
	_, err = s.GetBlob(ctx, s.tenant("other"), h)
	wantKind(t, err, fault.NotFound)
	if n := strings.Count(logs.String(), "record found damaged when read"); n != 1 || !recorded() || s.Stats().PackHoles != 1 {
		t.Fatalf("logged the damage %d times, rows %+v, %d holes; want once, one row, one hole", n, s.packHoleRows(), s.Stats().PackHoles)
	}

	// The next start does not verify the record, but pack_holes names it.
	if err := s.Engine.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.tryOpen(); err != nil {
		t.Fatal(err)
	}
	if s.Stats().PackHoles != 1 || s.Degraded() == "" {
		t.Fatalf("after a restart: %d holes, degraded %q; want the recorded hole", s.Stats().PackHoles, s.Degraded())
	}
	_, err = s.GetBlob(ctx, s.ten, h)
	wantNamesHole(t, "GetBlob after a restart", err, h, entry)
	if !recorded() {
		t.Fatalf("pack_holes after a restart: %+v", s.packHoleRows())
	}

	// Storing the blob again heals it, now and after the next start.
	s.add(s.payloads[k])
	for round := range 2 {
		if data, err := s.GetBlob(ctx, s.ten, h); err != nil || !bytes.Equal(data, s.payloads[k]) {
			t.Fatalf("round %d: GetBlob of the blob stored again: %q, %v", round, data, err)
		}
		if errs := s.readAll(); len(errs) != 0 {
			t.Fatalf("round %d: read errors %v", round, errs)
		}
		if err := s.Engine.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.tryOpen(); err != nil {
			t.Fatal(err)
		}
	}
}

// lostStore is a damagedStore whose turn k's payload record is damaged and
// whose blobs.idx is gone: the pack's scan keeps a hole that nothing in the
// pack ties to the blob. Tenant globex stored the same bytes after the
// default tenant did (a claim in tenant_blobs), and tenant other did not.
func newLostStore(t *testing.T, k int) (s *damagedStore, entry blobpack.Entry, globex, other ident.Tenant) {
	t.Helper()
	s = newDamagedStore(t)
	if err := s.tryOpen(); err != nil {
		t.Fatal(err)
	}
	globex, other = s.tenant("globex"), s.tenant("other")
	if isNew, err := s.PutBlob(context.Background(), globex, s.turns[k].ContentHash, s.payloads[k]); err != nil || !isNew {
		t.Fatalf("globex stores the bytes of turn %d: new %v, %v; want a new claim", k, isNew, err)
	}
	if err := s.Engine.Close(); err != nil {
		t.Fatal(err)
	}
	entry = s.entry(k)
	filefault.Flip(t, s.packPath(), entry.Offset+60)
	if err := os.Remove(filepath.Join(blobDir(s.dir), blobpack.IndexFile)); err != nil {
		t.Fatal(err)
	}
	if err := s.tryOpen(); err != nil {
		t.Fatalf("open after damage: %v", err)
	}
	if holes := s.blobs.Holes(); len(holes) != 1 || holes[0].HashKnown {
		t.Fatalf("holes %+v, want one whose blob is unknown", holes)
	}
	return s, entry, globex, other
}

func TestLostBlobIsAnInternalErrorToThoseWhoStoredIt(t *testing.T) {
	t.Parallel()
	const k = 100
	s, entry, globex, other := newLostStore(t, k)
	ctx := context.Background()
	h := s.turns[k].ContentHash
	_, err := s.GetBlob(ctx, s.ten, h)
	wantNamesHole(t, "GetBlob by the tenant whose turn names it", err, h, entry)
	_, err = s.GetBlob(ctx, globex, h)
	wantNamesHole(t, "GetBlob by a tenant that stored it too", err, h, entry)

	// Another tenant's blob and one never stored answer alike.
	never := ident.Hash(blake3.Sum256([]byte("content nobody stored")))
	_, errOther := s.GetBlob(ctx, other, h)
	_, errNever := s.GetBlob(ctx, other, never)
	_, errOwnNever := s.GetBlob(ctx, s.ten, never)
	for _, err := range []error{errOther, errNever, errOwnNever} {
		wantKind(t, err, fault.NotFound)
	}
	strip := func(err error, h ident.Hash) string {
		return strings.ReplaceAll(err.Error(), fmt.Sprintf("%x", h), "<hash>")
	}
	if strip(errOther, h) != strip(errNever, never) || strip(errNever, never) != strip(errOwnNever, never) {
		t.Fatalf("not found answers differ: %q, %q, %q", errOther, errNever, errOwnNever)
	}

	// Storing the bytes again heals the blob for everyone who has it.
	if _, err := s.PutBlob(ctx, globex, h, s.payloads[k]); err != nil {
		t.Fatal(err)
	}
	for _, ten := range []ident.Tenant{s.ten, globex} {
		if data, err := s.GetBlob(ctx, ten, h); err != nil || !bytes.Equal(data, s.payloads[k]) {
			t.Fatalf("GetBlob by %s after the heal: %q, %v", ten.ID, data, err)
		}
	}
	_, err = s.GetBlob(ctx, other, h)
	wantKind(t, err, fault.NotFound)
}

// With two holes whose blobs are unknown, a lost blob lies in one of
// them: the error counts them and names the first.
func TestLostBlobAmongSeveralHolesCountsThem(t *testing.T) {
	t.Parallel()
	s := newDamagedStore(t)
	first, second := s.entry(100), s.entry(200)
	filefault.Flip(t, s.packPath(), first.Offset+60)
	filefault.Flip(t, s.packPath(), second.Offset+60)
	if err := os.Remove(filepath.Join(blobDir(s.dir), blobpack.IndexFile)); err != nil {
		t.Fatal(err)
	}
	if err := s.tryOpen(); err != nil {
		t.Fatalf("open after damage: %v", err)
	}
	for _, k := range []int{100, 200} {
		h := s.turns[k].ContentHash
		_, err := s.GetBlob(context.Background(), s.ten, h)
		var se *fault.Error
		span := fmt.Sprintf("the first at bytes %d..%d of blobs.pack", first.Offset, first.End())
		if !errors.As(err, &se) || se.Kind != fault.Internal || !strings.Contains(se.Message, fmt.Sprintf("%x", h)) ||
			!strings.Contains(se.Message, "one of the 2 damaged regions") || !strings.Contains(se.Message, span) {
			t.Fatalf("GetBlob of turn %d's lost payload: %v; want an internal error naming it, counting 2 regions, %s", k, err, span)
		}
		if se.Details["blob"] != fmt.Sprintf("%x", h) || se.Details["damaged_regions"] != 2 {
			t.Fatalf("details %v", se.Details)
		}
	}
	_, err := s.GetBlob(context.Background(), s.tenant("other"), s.turns[100].ContentHash)
	wantKind(t, err, fault.NotFound)
}
