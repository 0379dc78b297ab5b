package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// Postgres's errors take their kind where the store wraps them (wrapf,
// and a group's commitError): a full disk is KindDiskFull (507) on every
// path, whatever kind the path assumed; the rest of class 53 is
// unavailable (503).
func TestPostgresErrorKinds(t *testing.T) {
	pg := func(severity, code string) error {
		return &pgconn.PgError{Severity: severity, SeverityUnlocalized: severity, Code: code,
			Message: "could not extend file \"base/1/2\": No space left on device"}
	}
	for _, tt := range []struct {
		name string
		err  error
		want Kind
	}{
		{"53100 disk_full", pg("ERROR", "53100"), KindDiskFull},
		{"53100 in a WAL write's PANIC", pg("PANIC", "53100"), KindDiskFull},
		{"53000 insufficient_resources", pg("ERROR", "53000"), KindUnavailable},
		{"53200 out_of_memory", pg("ERROR", "53200"), KindUnavailable},
		{"53300 too_many_connections", pg("FATAL", "53300"), KindUnavailable},
		{"53400 configuration_limit_exceeded", pg("ERROR", "53400"), KindUnavailable},
		{"57P02 crash_shutdown", pg("FATAL", "57P02"), KindUnavailable},
		{"58030 io_error in a PANIC", pg("PANIC", "58030"), KindUnavailable},
		{"58030 io_error", pg("ERROR", "58030"), KindInternal},
		{"23505 unique_violation", pg("ERROR", "23505"), KindUnprocessable},
		{"42601 syntax_error", pg("ERROR", "42601"), KindInternal},
		{"deadline", context.DeadlineExceeded, KindUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// The group commit's path.
			if got := KindOf(commitError(tt.err)); got != tt.want {
				t.Errorf("commitError: %v, want %v", got, tt.want)
			}
			// A path that names its kind: only a full disk overrides it.
			want := KindUnavailable
			if tt.want == KindDiskFull {
				want = KindDiskFull
			}
			if got := KindOf(wrapf(KindUnavailable, tt.err, "look up blob")); got != want {
				t.Errorf("wrapf(unavailable): %v, want %v", got, want)
			}
		})
	}
	e := wrapf(KindInternal, pg("ERROR", "53100"), "commit turns")
	if !strings.Contains(e.Error(), "Postgres's disk is full") {
		t.Errorf("a full disk's message: %q", e.Error())
	}
}

// A real full disk under Postgres: the turns table lives on a small
// tmpfs, which the test fills. An append is refused with KindDiskFull
// (was: internal), the store keeps serving, and appends succeed again
// once space is freed.
func TestPostgresFullDiskIsDiskFullAndHeals(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	dir := pgtest.SmallDisk(t, pgtest.DBName(url), 4<<20, "turns")
	e := openOn(t, t.TempDir(), url)
	ctx := context.Background()
	ten, err := e.Tenant(ctx, ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.CreateContext(ctx, ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	free := pgtest.FillDisk(t, dir)
	var full error
	for i := 0; full == nil; i++ {
		if i > 10_000 {
			t.Fatal("Postgres's disk never filled up")
		}
		_, full = e.Append(ctx, ten, turnReq(h.ContextID, 0, payloadN(i)))
	}
	wantKind(t, full, KindDiskFull)
	var pgErr *pgconn.PgError
	if !errors.As(full, &pgErr) || pgErr.Code != "53100" {
		t.Fatalf("the refusal's cause: %v, want SQLSTATE 53100 from Postgres", full)
	}
	if err := e.Healthy(ctx); err != nil {
		t.Fatalf("the store stopped on Postgres's full disk: %v", err)
	}
	free()
	if _, err := e.Append(ctx, ten, turnReq(h.ContextID, 0, payloadN(1_000_000))); err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
}
