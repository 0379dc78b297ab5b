package auth

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/internal/fault"
)

// A key lookup that failed is 503, or 507 when Postgres's disk is full,
// as the store's own lookups are.
func TestLookupErrorKinds(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want fault.Kind
	}{
		{"connection lost", errors.New("unexpected EOF"), fault.Unavailable},
		{"too many connections", &pgconn.PgError{Code: "53300"}, fault.Unavailable},
		{"disk full", &pgconn.PgError{Code: "53100", Message: "could not extend file"}, fault.DiskFull},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := fault.KindOf(unavailable("key_1", c.err)); got != c.want {
				t.Errorf("kind %v, want %v", got, c.want)
			}
		})
	}
}
