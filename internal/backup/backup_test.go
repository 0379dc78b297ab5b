package backup_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/backup"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/salvage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// liveStore is an open store in an external database (the test's
// Postgres, whose owner is no superuser).
type liveStore struct {
	dir, url string
	pool     *pgxpool.Pool
	engine   *store.Engine
	tenant   ident.Tenant
	ctxID    uint64
	payloads map[uint64][]byte
	rng      *rand.ChaCha8
}

func newLiveStore(t *testing.T) *liveStore {
	t.Helper()
	return newLiveStoreWith(t, store.Options{})
}

// newLiveStoreWith opens the store with opts (its directory and pool
// set here).
func newLiveStoreWith(t *testing.T, opts store.Options) *liveStore {
	t.Helper()
	pool, url := pgtest.NewPoolAndURL(t)
	s := &liveStore{dir: t.TempDir(), url: url, pool: pool, payloads: map[uint64][]byte{}, rng: rand.NewChaCha8([32]byte{7})}
	opts.Dir, opts.Pool = s.dir, pool
	e, err := store.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	s.engine = e
	t.Cleanup(func() { e.Close() })
	if s.tenant, err = e.Tenant(context.Background(), ident.DefaultTenantID); err != nil {
		t.Fatal(err)
	}
	h, err := e.CreateContext(context.Background(), s.tenant, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	s.ctxID = h.ContextID
	return s
}

// appendTurns appends n turns of incompressible 48 KiB payloads.
func (s *liveStore) appendTurns(t *testing.T, n int) {
	t.Helper()
	for range n {
		p := make([]byte, 48<<10)
		s.rng.Read(p)
		r, err := s.engine.Append(context.Background(), s.tenant, &store.AppendRequest{
			ContextID: s.ctxID, TypeID: "t", TypeVersion: 1, Encoding: 1,
			UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.payloads[r.TurnID] = p
	}
}

// emptyDB creates an empty database owned by the tests' owner role.
func emptyDB(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.SuperuserURL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	owner := ""
	if o := pgtest.Owner(); o != "" {
		owner = " OWNER " + pgx.Identifier{o}.Sanitize()
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+owner); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pgtest.SuperuserURL("postgres"))
		if err == nil {
			c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	return pgtest.URL(name)
}

// A second backup into the same directory copies only the segments that
// changed, and its restore into an empty external database reads every
// turn back, with `cardbox verify`'s checks clean.
func TestIncrementalBackupRestoresIntoExternalDatabase(t *testing.T) {
	ctx := context.Background()
	s := newLiveStore(t)
	s.appendTurns(t, 40) // about 2 MB of pack
	dest := filepath.Join(t.TempDir(), "backup")
	opts := backup.Options{DataDir: s.dir, Dest: dest, DatabaseURL: s.url, SegmentSize: 256 << 10, Rate: -1}
	first, err := backup.Backup(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if total := first.Committed.Pack + first.Committed.TurnLog; first.Copied != total {
		t.Fatalf("first backup copied %d of %d bytes", first.Copied, total)
	}
	s.appendTurns(t, 2)
	second, err := backup.Backup(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	total := second.Committed.Pack + second.Committed.TurnLog
	if second.Copied == 0 || second.Copied > 2*(256<<10)+second.Committed.TurnLog {
		t.Fatalf("incremental backup copied %d of %d bytes, want at most the last two pack segments and the turn log", second.Copied, total)
	}
	if first.Files[0].Segments[0] != second.Files[0].Segments[0] {
		t.Fatalf("the first sealed segment was copied again: %+v, then %+v", first.Files[0].Segments[0], second.Files[0].Segments[0])
	}
	for _, b := range first.Files[0].Segments[len(first.Files[0].Segments)-1:] {
		if _, err := os.Stat(filepath.Join(dest, b.Name)); err == nil && b != second.Files[0].Segments[len(first.Files[0].Segments)-1] {
			t.Fatalf("the previous backup's last segment %s was not pruned", b.Name)
		}
	}
	s.engine.Close()

	restored := filepath.Join(t.TempDir(), "restored")
	target := emptyDB(t, pgtest.DBName(s.url)+"_restored")
	if _, err := backup.Restore(ctx, backup.RestoreOptions{Src: dest, DataDir: restored, DatabaseURL: target}); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r, err := salvage.Verify(ctx, restored, pool, nil)
	if err != nil || !r.OK() {
		var b strings.Builder
		if r != nil {
			r.Print(&b)
		}
		t.Fatalf("verify of the restored store: %v\n%s", err, b.String())
	}
	e, err := store.Open(ctx, store.Options{Dir: restored, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got, err := e.Last(ctx, s.tenant, s.ctxID, 1000, true)
	if err != nil || len(got) != len(s.payloads) {
		t.Fatalf("restored store reads %d turns (%v), want %d", len(got), err, len(s.payloads))
	}
	for _, tr := range got {
		if string(tr.Payload) != string(s.payloads[tr.ID]) {
			t.Fatalf("turn %d reads other bytes", tr.ID)
		}
	}
}

// Bad input is refused with one line saying why, before anything is
// written.
func TestRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	s := newLiveStore(t)
	s.appendTurns(t, 1)
	dest := filepath.Join(t.TempDir(), "backup")
	if _, err := backup.Backup(ctx, backup.Options{DataDir: s.dir, Dest: dest, DatabaseURL: s.url}); err != nil {
		t.Fatal(err)
	}
	other := newLiveStore(t)
	busy := t.TempDir()
	os.WriteFile(filepath.Join(busy, "notes.txt"), []byte("mine"), 0o644)
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"backup into the data directory", func() error {
			_, err := backup.Backup(ctx, backup.Options{DataDir: s.dir, Dest: filepath.Join(s.dir, "b"), DatabaseURL: s.url})
			return err
		}, "is inside the data directory"},
		{"backup into a directory of other files", func() error {
			_, err := backup.Backup(ctx, backup.Options{DataDir: s.dir, Dest: busy, DatabaseURL: s.url})
			return err
		}, "holds other files (notes.txt)"},
		{"backup of another store into a backup", func() error {
			_, err := backup.Backup(ctx, backup.Options{DataDir: other.dir, Dest: dest, DatabaseURL: other.url})
			return err
		}, "holds a backup of store"},
		{"backup with another store's database", func() error {
			_, err := backup.Backup(ctx, backup.Options{DataDir: s.dir, Dest: t.TempDir(), DatabaseURL: other.url})
			return err
		}, "but the database holds store"},
		{"backup of an external store without its URL", func() error {
			_, err := backup.Backup(ctx, backup.Options{DataDir: s.dir, Dest: t.TempDir()})
			return err
		}, "give the server's database URL"},
		{"restore from a directory that is no backup", func() error {
			_, err := backup.Restore(ctx, backup.RestoreOptions{Src: busy, DataDir: filepath.Join(t.TempDir(), "x"), DatabaseURL: s.url})
			return err
		}, "not a cardbox backup"},
		{"restore into a store", func() error {
			_, err := backup.Restore(ctx, backup.RestoreOptions{Src: dest, DataDir: other.dir, DatabaseURL: s.url})
			return err
		}, "already holds store"},
		{"restore into a database with tables", func() error {
			_, err := backup.Restore(ctx, backup.RestoreOptions{Src: dest, DataDir: filepath.Join(t.TempDir(), "x"), DatabaseURL: other.url})
			return err
		}, "restore into a new, empty database"},
		{"restore of an external store without a database", func() error {
			_, err := backup.Restore(ctx, backup.RestoreOptions{Src: dest, DataDir: filepath.Join(t.TempDir(), "x")})
			return err
		}, "give --database-url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line with %q", err, tc.want)
			}
		})
	}
}
