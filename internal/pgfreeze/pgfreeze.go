// Package pgfreeze stops a Postgres cluster in its tracks, for tests: the
// postmaster and every process under it get SIGSTOP, so that connections
// stay open, the kernel still takes what clients send, and nothing
// answers, as a stalled disk or a paused VM makes Postgres look. Thawing
// (SIGCONT) lets every process go on where it stopped.
//
// A test must freeze a cluster of its own (NewCluster, or the embedded
// cluster of a cardboxd it started), never the shared test cluster of
// internal/pgtest: every other test would stop with it.
package pgfreeze

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/pgembed"
	"github.com/cardboxhq/cardbox/migrations"
)

// Frozen is a stopped cluster.
type Frozen struct {
	pids []int // postmaster first
	once sync.Once
}

// Freeze stops the cluster whose data directory is pgdata (Stop) and
// thaws it when the test ends, however it ends. It must be called from
// the test's goroutine.
func Freeze(t testing.TB, pgdata string) *Frozen {
	t.Helper()
	f, err := Stop(pgdata)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Thaw)
	return f
}

// Stop stops the cluster whose data directory is pgdata (where
// postmaster.pid is): its postmaster first, so that it forks nothing
// more, then every process under it. It returns once all of them are
// stopped; on an error it thaws what it stopped. The caller must Thaw it,
// in a t.Cleanup registered before it calls Stop (Freeze does both).
func Stop(pgdata string) (*Frozen, error) {
	postmaster, err := postmasterPID(pgdata)
	if err != nil {
		return nil, err
	}
	f := &Frozen{pids: []int{postmaster}}
	if err := syscall.Kill(postmaster, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("pgfreeze: stop postmaster %d: %w", postmaster, err)
	}
	if err := waitStopped(postmaster); err != nil {
		f.Thaw()
		return nil, err
	}
	// The postmaster is stopped: the set of its descendants is final.
	for _, pid := range descendants(postmaster) {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			continue // it exited meanwhile
		}
		f.pids = append(f.pids, pid)
	}
	for _, pid := range f.pids[1:] {
		if err := waitStopped(pid); err != nil && processExists(pid) {
			f.Thaw()
			return nil, err
		}
	}
	return f, nil
}

// Processes returns how many processes were stopped, the postmaster
// included.
func (f *Frozen) Processes() int { return len(f.pids) }

// Thaw lets every stopped process go on (SIGCONT); thawing twice, or a
// nil Frozen, does nothing.
func (f *Frozen) Thaw() {
	if f == nil {
		return
	}
	f.once.Do(func() {
		for i := len(f.pids) - 1; i >= 0; i-- {
			_ = syscall.Kill(f.pids[i], syscall.SIGCONT)
		}
	})
}

// postmasterPID reads the first line of pgdata/postmaster.pid.
func postmasterPID(pgdata string) (int, error) {
	b, err := os.ReadFile(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgfreeze: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pgfreeze: postmaster.pid of %s names no process: %q", pgdata, first)
	}
	return pid, nil
}

// descendants lists the processes under pid, from /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := stat(p); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// stat returns a process's state letter and parent from /proc/pid/stat.
func stat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil || len(fields[0]) != 1 {
		return 0, 0, false
	}
	return fields[0][0], ppid, true
}

func processExists(pid int) bool {
	_, _, ok := stat(pid)
	return ok
}

// waitStopped polls until pid is in the stopped state (SIGSTOP is
// delivered asynchronously), or has exited: a backend that ended between
// the listing and the signal runs no more (a zombie, which the frozen
// postmaster cannot reap, or gone).
func waitStopped(pid int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		state, _, ok := stat(pid)
		if !ok || state == 'T' || state == 't' || state == 'Z' || state == 'X' {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgfreeze: process %d not stopped after 10s (state %c)", pid, state)
		}
		time.Sleep(time.Millisecond)
	}
}

// Cluster is a private embedded cluster a test may freeze.
type Cluster struct {
	srv *pgembed.Server
	dir string
}

// NewCluster initialises and starts a private cluster (durability off, as
// internal/pgtest's) in a directory of its own, and stops and removes it
// when the test ends.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	// Not t.TempDir: its parent is private, and postgres may run as
	// another user (when the tests run as root).
	dir, err := os.MkdirTemp("", "cardbox-pgfreeze-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := pgembed.Start(context.Background(), pgembed.Options{Dir: dir, Settings: map[string]string{
		"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "max_connections": "100",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop the private cluster: %v", err)
		}
	})
	return &Cluster{srv: srv, dir: dir}
}

// PGData is the cluster's data directory, for Freeze.
func (c *Cluster) PGData() string { return filepath.Join(c.dir, "pgdata") }

// NewDB creates database name, migrated, and returns its URL (as the
// cluster's superuser).
func (c *Cluster) NewDB(t testing.TB, name string) string {
	t.Helper()
	ctx := context.Background()
	if err := c.srv.EnsureDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	url := c.srv.URL(name)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := migrations.Up(ctx, pool); err != nil {
		t.Fatalf("migrate the private cluster: %v", err)
	}
	return url
}
