// Package testbin is what tests that run the project's commands as a user
// would share: the commands built once per test binary, and a buffer for
// a process's output that the process writes while the test reads it.
package testbin

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cardboxhq/cardbox/internal/testkit"
)

// builds are the directories built so far in this test binary, by the
// packages they hold.
var builds = struct {
	sync.Mutex
	dirs map[string]build
}{dirs: map[string]build{}}

type build struct {
	dir string
	err error
}

// Build builds the commands in pkgs (paths from the module's root, such
// as "./cmd/cardboxd") into one directory, once per test binary for the
// same pkgs, and returns the directory. CGO is off, as in the image.
func Build(t testing.TB, pkgs ...string) string {
	t.Helper()
	key := strings.Join(pkgs, " ")
	builds.Lock()
	defer builds.Unlock()
	b, ok := builds.dirs[key]
	if !ok {
		b.dir, b.err = goBuild(pkgs)
		builds.dirs[key] = b
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.dir
}

// Command is Build of one command, returning the path of its binary.
func Command(t testing.TB, pkg string) string {
	t.Helper()
	return filepath.Join(Build(t, pkg), filepath.Base(pkg))
}

func goBuild(pkgs []string) (string, error) {
	root, err := testkit.FindRepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "cardbox-bin-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(os.PathSeparator)}, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	return dir, nil
}

// Output is a process's output: the process writes it while the test may
// read it.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String returns what was written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
