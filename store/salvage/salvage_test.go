package salvage_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/filefault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/salvage"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const turns = 50

// stopped is a data directory with turns, its store closed.
type stopped struct {
	t        *testing.T
	dir      string
	pool     *pgxpool.Pool
	ctxID    uint64
	payloads map[uint64][]byte // by turn id
}

func newStopped(t *testing.T) *stopped {
	t.Helper()
	s := &stopped{t: t, dir: t.TempDir(), pool: pgtest.NewPool(t), payloads: map[uint64][]byte{}}
	e := s.open()
	ten, err := e.Tenant(context.Background(), ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.CreateContext(context.Background(), ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	s.ctxID = h.ContextID
	for i := range turns {
		p := []byte(fmt.Sprintf("payload %d %s", i, strings.Repeat("x", i*7)))
		r, err := e.Append(context.Background(), ten, &store.AppendRequest{
			ContextID: h.ContextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
			UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.payloads[r.TurnID] = p
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *stopped) open() *store.Engine {
	s.t.Helper()
	e, err := store.Open(context.Background(), store.Options{Dir: s.dir, Pool: s.pool})
	if err != nil {
		s.t.Fatalf("open store: %v", err)
	}
	return e
}

// readsAll opens the store and reads every turn with its payload.
func (s *stopped) readsAll() {
	s.t.Helper()
	e := s.open()
	defer e.Close()
	ten, _ := e.Tenant(context.Background(), ident.DefaultTenantID)
	got, err := e.Last(context.Background(), ten, s.ctxID, turns, true)
	if err != nil || len(got) != turns {
		s.t.Fatalf("after recover: %d turns, %v", len(got), err)
	}
	for _, tr := range got {
		if string(tr.Payload) != string(s.payloads[tr.ID]) {
			s.t.Fatalf("turn %d reads %q", tr.ID, tr.Payload)
		}
	}
}

func (s *stopped) verify() *salvage.Report {
	s.t.Helper()
	r, err := salvage.Verify(context.Background(), s.dir, s.pool, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

func (s *stopped) recover() *salvage.Report {
	s.t.Helper()
	r, err := salvage.Recover(context.Background(), s.dir, s.pool, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	if r.StartErr != nil {
		s.t.Fatalf("the store does not start after recover: %v", r.StartErr)
	}
	return r
}

func TestVerifyCleanStore(t *testing.T) {
	t.Parallel()
	s := newStopped(t)
	if r := s.verify(); !r.OK() || r.Turns != turns || r.Records != turns || r.Blobs != turns {
		t.Fatalf("clean store: %+v", r)
	}
}

func TestRecoverRebuildsTheTurnLog(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		damage func(t *testing.T, s *stopped)
	}{
		{"damaged record", func(t *testing.T, s *stopped) {
			t.Helper()
			filefault.Flip(t, store.TurnLogPath(s.dir), 10*turnlog.RecordSize+3)
		}},
		{"missing log", func(t *testing.T, s *stopped) {
			t.Helper()
			if err := os.RemoveAll(filepath.Dir(store.TurnLogPath(s.dir))); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStopped(t)
			tt.damage(t, s)
			if _, err := store.Open(context.Background(), store.Options{Dir: s.dir, Pool: s.pool}); err == nil {
				t.Fatal("the damaged store started")
			}
			if r := s.verify(); r.OK() {
				t.Fatalf("verify found nothing: %+v", r)
			}
			r := s.recover()
			if !r.OK() {
				t.Fatalf("after recover: %+v", r)
			}
			s.readsAll()
		})
	}
}

func TestRecoverRebuildsThePackIndex(t *testing.T) {
	t.Parallel()
	s := newStopped(t)
	if err := os.Remove(filepath.Join(store.BlobDir(s.dir), blobpack.IndexFile)); err != nil {
		t.Fatal(err)
	}
	s.recover()
	if _, err := os.Stat(filepath.Join(store.BlobDir(s.dir), blobpack.IndexFile)); err != nil {
		t.Fatalf("no index after recover: %v", err)
	}
	s.readsAll()
}

func TestDamagedBlobIsReportedNotHidden(t *testing.T) {
	t.Parallel()
	s := newStopped(t)
	p, err := blobpack.Open(store.BlobDir(s.dir), blobpack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var victim ident.Hash
	for id, payload := range s.payloads {
		if id == 20 {
			victim = blake3.Sum256(payload)
		}
	}
	e, _ := p.Lookup(victim)
	p.Close()
	filefault.Flip(t, filepath.Join(store.BlobDir(s.dir), blobpack.PackFile), e.Offset+60)
	r := s.verify()
	if len(r.PackDefects) != 1 || r.Counts["payloads missing"] != 1 {
		t.Fatalf("verify: %+v, want one damaged record and one missing payload", r)
	}
	after := s.recover() // the store starts, degraded
	if after.OK() || !strings.Contains(strings.Join(after.Actions, "\n"), "damaged regions") {
		t.Fatalf("recover hid the damage: %+v", after)
	}
}

// A data directory and a database of different stores are refused before
// anything is read or rebuilt.
func TestRefusesAnotherStoresDirectory(t *testing.T) {
	t.Parallel()
	a, b := newStopped(t), newStopped(t)
	before, err := os.ReadFile(store.TurnLogPath(a.dir))
	if err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func(context.Context, string, *pgxpool.Pool, io.Writer) (*salvage.Report, error){
		"verify": salvage.Verify, "recover": salvage.Recover,
	} {
		if _, err := run(context.Background(), a.dir, b.pool, nil); err == nil || !strings.Contains(err.Error(), "belongs to turn store") {
			t.Errorf("%s of another store's directory: %v", name, err)
		}
	}
	if after, _ := os.ReadFile(store.TurnLogPath(a.dir)); string(after) != string(before) {
		t.Fatal("the other store's turn log changed")
	}
}

// A deleted tenant's turn records stay in the turn log without their rows:
// verify counts them apart and reports no damage, recover leaves the log
// alone, and the store starts without them.
func TestDeletedTenantIsNotDamage(t *testing.T) {
	t.Parallel()
	s := newStopped(t)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `INSERT INTO tenants (tenant_id) VALUES ('acme')`); err != nil {
		t.Fatal(err)
	}
	e := s.open()
	acme, err := e.Tenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.CreateContext(ctx, acme, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	const acmeTurns = 7
	for i := range acmeTurns {
		p := []byte(fmt.Sprintf("acme %d", i))
		_, err := e.Append(ctx, acme, &store.AppendRequest{
			ContextID: h.ContextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
			UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	pgtest.MarkTenantDeleted(t, s.pool, "acme")
	pgtest.PurgeDeletedTenant(t, s.pool, "acme")

	if r := s.verify(); !r.OK() || r.Turns != turns || r.Records != turns || r.DeletedRecords != acmeTurns {
		t.Fatalf("verify after the deletion: %+v", r)
	}
	r := s.recover()
	if !r.OK() || r.DeletedRecords != acmeTurns || strings.Contains(strings.Join(r.Actions, "\n"), "turn log") {
		t.Fatalf("recover after the deletion: %+v", r)
	}
	s.readsAll()
}

// A deleted context's dead turns keep their records in the turn log
// without their rows: verify counts them and the deleted contexts apart
// and reports no damage, recover leaves the log alone.
func TestDeadTurnsAreNotDamage(t *testing.T) {
	t.Parallel()
	s := newStopped(t)
	ctx := context.Background()
	e := s.open()
	ten, err := e.Tenant(ctx, ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.CreateContext(ctx, ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	const doomed = 5
	for i := range doomed {
		p := []byte(fmt.Sprintf("doomed %d", i))
		if _, err := e.Append(ctx, ten, &store.AppendRequest{
			ContextID: h.ContextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
			UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.DeleteContext(ctx, ten, h.ContextID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ReapDeleted(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	if r := s.verify(); !r.OK() || r.Turns != turns || r.Records != turns || r.DeadRecords != doomed || r.DeletedContexts != 1 {
		t.Fatalf("verify after the deletion: %+v", r)
	}
	r := s.recover()
	if !r.OK() || r.DeadRecords != doomed || strings.Contains(strings.Join(r.Actions, "\n"), "turn log") {
		t.Fatalf("recover after the deletion: %+v", r)
	}
	var out strings.Builder
	r.Print(&out)
	if want := fmt.Sprintf("%d of dead turns of 1 deleted contexts", doomed); !strings.Contains(out.String(), want) {
		t.Errorf("the report does not say %q:\n%s", want, out.String())
	}
	s.readsAll()
}
