package testkit

import (
	"fmt"
	"os"
	"testing"
)

// InCI reports whether the tests run in CI (the CI variable is set, as
// .ci/run sets it), where nothing a test needs may be missing.
func InCI() bool { return os.Getenv("CI") != "" }

// SkipOrFail stops a test whose prerequisite (shared fixtures, root for a
// tmpfs, a tool) is missing: in CI it fails, since a skipped test there
// would hide what it checks; elsewhere it skips with a warning that says
// what was not checked.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatal(why)
	}
	t.Skip("WARNING: skipped: " + why)
}
