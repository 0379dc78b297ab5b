package groupcommit

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/internal/fault"
)

// Postgres's errors take their kind where the store wraps them (fault.Wrap,
// and a group's commitError): a full disk is fault.DiskFull (507) on every
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
		want fault.Kind
	}{
		{"53100 disk_full", pg("ERROR", "53100"), fault.DiskFull},
		{"53100 in a WAL write's PANIC", pg("PANIC", "53100"), fault.DiskFull},
		{"53000 insufficient_resources", pg("ERROR", "53000"), fault.Unavailable},
		{"53200 out_of_memory", pg("ERROR", "53200"), fault.Unavailable},
		{"53300 too_many_connections", pg("FATAL", "53300"), fault.Unavailable},
		{"53400 configuration_limit_exceeded", pg("ERROR", "53400"), fault.Unavailable},
		{"57P02 crash_shutdown", pg("FATAL", "57P02"), fault.Unavailable},
		{"58030 io_error in a PANIC", pg("PANIC", "58030"), fault.Unavailable},
		{"58030 io_error", pg("ERROR", "58030"), fault.Internal},
		{"23505 unique_violation", pg("ERROR", "23505"), fault.Unprocessable},
		{"42601 syntax_error", pg("ERROR", "42601"), fault.Internal},
		{"deadline", context.DeadlineExceeded, fault.Unavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// The group commit's path.
			if got := fault.KindOf(commitError(tt.err)); got != tt.want {
				t.Errorf("commitError: %v, want %v", got, tt.want)
			}
			// A path that names its kind: only a full disk overrides it.
			want := fault.Unavailable
			if tt.want == fault.DiskFull {
				want = fault.DiskFull
			}
			if got := fault.KindOf(fault.Wrap(fault.Unavailable, tt.err, "look up blob")); got != want {
				t.Errorf("fault.Wrap(unavailable): %v, want %v", got, want)
			}
		})
	}
	e := fault.Wrap(fault.Internal, pg("ERROR", "53100"), "commit turns")
	if !strings.Contains(e.Error(), "Postgres's disk is full") {
		t.Errorf("a full disk's message: %q", e.Error())
	}
}
