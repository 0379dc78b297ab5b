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
	tests := []struct {
		name              string
		err               error
		unavailable, data bool
	}{
		{"nil", nil, false, false},
		{"connection refused", connectFailure, true, false},
		{"wrapped connection refused", fmt.Errorf("load box: %w", connectFailure), true, false},
		{"deadline", context.DeadlineExceeded, true, false},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true, false},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, true, false},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true, false},
		{"disk full", &pgconn.PgError{Code: "53100"}, false, false},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true, false},
		{"statement timeout", &pgconn.PgError{Code: "57014"}, true, false},
		{"untranslatable character", &pgconn.PgError{Code: "22P05"}, false, true},
		{"unique violation", fmt.Errorf("insert: %w", &pgconn.PgError{Code: "23505"}), false, true},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false, false},
		{"other error", errors.New("boom"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pgerr.Unavailable(tt.err); got != tt.unavailable {
				t.Errorf("Unavailable(%v) = %v, want %v", tt.err, got, tt.unavailable)
			}
			if got := pgerr.DataError(tt.err); got != tt.data {
				t.Errorf("DataError(%v) = %v, want %v", tt.err, got, tt.data)
			}
			if got := pgerr.DiskFull(tt.err); got != (tt.name == "disk full") {
				t.Errorf("DiskFull(%v) = %v", tt.err, got)
			}
			if got := pgerr.UniqueViolation(tt.err); got != (tt.name == "unique violation") {
				t.Errorf("UniqueViolation(%v) = %v", tt.err, got)
			}
		})
	}
}
