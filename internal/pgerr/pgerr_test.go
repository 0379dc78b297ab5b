package pgerr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/internal/pgerr"
)

func TestClassify(t *testing.T) {
	connectFailure := func() error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Nothing listens on port 1 of the loopback address.
		_, err := pgx.Connect(ctx, "postgres://x@127.0.0.1:1/x?connect_timeout=2&sslmode=disable")
		return err
	}()
	code := func(c string) error { return &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: c} }
	panicked := func(c string) error {
		// A server that answers in another language says PANIC only in
		// the unlocalized field.
		return &pgconn.PgError{Severity: "PANIK", SeverityUnlocalized: "PANIC", Code: c}
	}
	const (
		other       = pgerr.ClassOther
		unavailable = pgerr.ClassUnavailable
		diskFull    = pgerr.ClassDiskFull
		data        = pgerr.ClassData
	)
	tests := []struct {
		name  string
		err   error
		class pgerr.Class
		// unavailable is Unavailable's answer when it differs from
		// class == unavailable (a PANIC that is also a full disk).
		alsoUnavailable bool
	}{
		{"nil", nil, other, false},
		{"connection refused", connectFailure, unavailable, false},
		{"wrapped connection refused", fmt.Errorf("load box: %w", connectFailure), unavailable, false},
		{"deadline", context.DeadlineExceeded, unavailable, false},
		{"admin shutdown", code("57P01"), unavailable, false},
		{"crash shutdown", code("57P02"), unavailable, false},
		{"cannot connect now", code("57P03"), unavailable, false},
		{"connection failure", code("08006"), unavailable, false},
		{"statement timeout", code("57014"), unavailable, false},
		{"serialization failure", code("40001"), unavailable, false},
		// Class 53, insufficient resources: only a full disk is 507.
		{"insufficient resources", code("53000"), unavailable, false},
		{"disk full", code("53100"), diskFull, false},
		{"wrapped disk full", fmt.Errorf("commit turns: %w", code("53100")), diskFull, false},
		{"connect error", &pgconn.ConnectError{Config: &pgconn.Config{}}, unavailable, false},
		{"out of memory", code("53200"), unavailable, false},
		{"too many connections", code("53300"), unavailable, false},
		{"configuration limit exceeded", code("53400"), unavailable, false},
		// A PANIC restarts the cluster: unavailable, and a full disk
		// (Postgres could not write its WAL) is still a full disk.
		{"WAL write panic, disk full", panicked("53100"), diskFull, true},
		{"fsync panic", panicked("58030"), unavailable, false},
		{"io error", code("58030"), other, false},
		{"untranslatable character", code("22P05"), data, false},
		{"unique violation", fmt.Errorf("insert: %w", code("23505")), data, false},
		{"syntax error", code("42601"), other, false},
		{"other error", errors.New("boom"), other, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pgerr.Classify(tt.err); got != tt.class {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.class)
			}
			if got, want := pgerr.Unavailable(tt.err), tt.class == unavailable || tt.alsoUnavailable; got != want {
				t.Errorf("Unavailable(%v) = %v, want %v", tt.err, got, want)
			}
			if got := pgerr.DataError(tt.err); got != (tt.class == data) {
				t.Errorf("DataError(%v) = %v", tt.err, got)
			}
			if got := pgerr.DiskFull(tt.err); got != (tt.class == diskFull) {
				t.Errorf("DiskFull(%v) = %v", tt.err, got)
			}
			if got := pgerr.UniqueViolation(tt.err); got != (tt.name == "unique violation") {
				t.Errorf("UniqueViolation(%v) = %v", tt.err, got)
			}
		})
	}
}

func TestConflict(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "40P01"}, true},
		{fmt.Errorf("mark: %w", &pgconn.PgError{Code: "40001"}), true},
		{&pgconn.PgError{Code: "23505"}, false},
		{errors.New("40P01"), false},
		{nil, false},
	} {
		if got := pgerr.Conflict(tt.err); got != tt.want {
			t.Errorf("Conflict(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
