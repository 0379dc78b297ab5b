package database

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/internal/logtest"
	"github.com/cardboxhq/cardbox/internal/pgembed"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// scriptedCluster is a cluster whose state is a function of a fake clock:
// the policy's test drives the supervisor through hours in microseconds.
type scriptedCluster struct {
	now      time.Duration // since the start
	diedAt   time.Duration // the postmaster dies then
	freeAt   time.Duration // the disk has room from then (never if negative)
	freeErr  error         // FreeBytes fails with it, when set
	fails    error         // Restart fails with it, when set and the disk is full
	running  bool
	attempts []time.Duration // when Restart was called
}

func (c *scriptedCluster) Running(context.Context) bool {
	if c.now >= c.diedAt && c.running && len(c.attempts) == 0 {
		c.running = false
	}
	return c.running
}

func (c *scriptedCluster) full() bool { return c.freeAt < 0 || c.now < c.freeAt }

func (c *scriptedCluster) Restart(context.Context) error {
	c.attempts = append(c.attempts, c.now)
	c.now += 300 * time.Millisecond // pg_ctl start takes a while
	if c.full() {
		return c.fails
	}
	c.running = true
	return nil
}

func (c *scriptedCluster) FreeBytes() (uint64, error) {
	if c.freeErr != nil {
		return 0, c.freeErr
	}
	if c.full() {
		return 1 << 20, nil
	}
	return 10 << 30, nil
}

// runFor runs the supervisor on c until the fake clock reaches end.
func runFor(t *testing.T, c *scriptedCluster, end time.Duration) *logtest.All {
	t.Helper()
	logs := &logtest.All{}
	s := newSupervisor(c, slog.New(logs))
	s.sleep = func(_ context.Context, d time.Duration) bool {
		c.now += d
		return c.now < end
	}
	s.run(context.Background())
	return logs
}

// What postgres says when it cannot write its lock file on a full disk.
var errNoSpace = errors.New(`embedded postgres: start: exit status 1: pg_ctl: could not start server
FATAL:  could not write lock file "postmaster.pid": No space left on device`)

// After a restart failed because the cluster's disk is full, the next is
// tried within a second of there being room, however long the disk was
// full (with the backoff it waited up to 30 s), and not while it is
// still full; other failures still back off to 30 s.
func TestRestartPolicy(t *testing.T) {
	t.Run("disk full", func(t *testing.T) {
		for _, fullFor := range []time.Duration{3 * time.Second, 47 * time.Second, 2 * time.Hour} {
			c := &scriptedCluster{running: true, diedAt: 10 * time.Second, fails: errNoSpace}
			c.freeAt = c.diedAt + fullFor
			logs := runFor(t, c, c.freeAt+time.Minute)
			if !c.running || len(c.attempts) != 2 {
				t.Fatalf("full for %v: running %v after restarts at %v; want the failed one and one more", fullFor, c.running, c.attempts)
			}
			if late := c.attempts[1] - c.freeAt; late < 0 || late > watchInterval {
				t.Errorf("full for %v: restarted %v after there was room, want within %v", fullFor, late, watchInterval)
			}
			if n := countLogs(logs, "disk is full"); n != 1 {
				t.Errorf("full for %v: %d lines say the disk is full, want 1: %q", fullFor, n, logs.Records())
			}
			if countLogs(logs, "its disk has room again") != 1 {
				t.Errorf("full for %v: the restart is not logged: %q", fullFor, logs.Records())
			}
		}
	})
	t.Run("disk full, free space unknown", func(t *testing.T) {
		c := &scriptedCluster{running: true, diedAt: 10 * time.Second, fails: errNoSpace, freeErr: errors.ErrUnsupported}
		c.freeAt = 5 * time.Minute
		runFor(t, c, c.freeAt+time.Minute)
		last := c.attempts[len(c.attempts)-1]
		if !c.running || last-c.freeAt > diskFullRetry+time.Second {
			t.Fatalf("running %v, last restart %v after there was room; want within %v", c.running, last-c.freeAt, diskFullRetry)
		}
		for i := 1; i < len(c.attempts); i++ {
			if gap := c.attempts[i] - c.attempts[i-1]; gap > diskFullRetry+time.Second {
				t.Fatalf("restarts %v apart, want every %v: postgres said its disk was full", gap, diskFullRetry)
			}
		}
	})
	t.Run("other failures back off", func(t *testing.T) {
		broken := errors.New("embedded postgres: start: exit status 1: FATAL: invalid value for parameter")
		c := &scriptedCluster{running: true, diedAt: 10 * time.Second, fails: broken, freeAt: -1}
		// The disk has room: FreeBytes says so.
		room := &roomyCluster{c}
		logs := &logtest.All{}
		s := newSupervisor(room, slog.New(logs))
		s.sleep = func(_ context.Context, d time.Duration) bool {
			c.now += d
			return c.now < 10*time.Minute
		}
		s.run(context.Background())
		var gaps []time.Duration
		for i := 1; i < len(c.attempts); i++ {
			gaps = append(gaps, (c.attempts[i] - c.attempts[i-1] - 300*time.Millisecond).Round(time.Second))
		}
		want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
		if len(gaps) < len(want) || fmt.Sprint(gaps[:len(want)]) != fmt.Sprint(want) {
			t.Fatalf("waits between failed restarts %v, want %v then 30s", gaps, want)
		}
	})
}

// roomyCluster is a scriptedCluster whose disk always has room.
type roomyCluster struct{ *scriptedCluster }

func (c *roomyCluster) FreeBytes() (uint64, error) { return 10 << 30, nil }

func countLogs(logs *logtest.All, substr string) int {
	n := 0
	for _, r := range logs.Records() {
		if strings.Contains(r, substr) {
			n++
		}
	}
	return n
}

// A real cluster on a small tmpfs, filled: a commit needs a new WAL
// segment, which cannot be written, and Postgres panics; its crash
// recovery must write a checkpoint into a new segment too, so it cannot
// start again and the postmaster exits. The supervisor restarts it once,
// fails, then waits for space without retrying, and restarts it within
// about a second of the space being freed.
func TestRestartWhenTheDiskHasRoomAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Postgres cluster")
	}
	// Not t.TempDir: postgres runs as another user when tests run as root.
	dir, err := os.MkdirTemp("", "cardbox-supervise-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=160m,mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		testkit.SkipOrFail(t, "full-disk test: cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		// The cluster's last processes may still be closing their files
		// when Stop returns (under load): the mount stays busy until then.
		waitfor.True(t, "the tmpfs to unmount", 30*time.Second, func() bool {
			return exec.Command("umount", dir).Run() == nil
		})
	})
	ctx := context.Background()
	srv, err := pgembed.Start(ctx, pgembed.Options{Dir: filepath.Join(dir, "pg"), Settings: map[string]string{
		"shared_buffers": "16MB", "max_wal_size": "64MB", "min_wal_size": "32MB",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	logs := &logtest.All{}
	s := newSupervisor(srv, slog.New(logs))
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.run(watchCtx) }()
	t.Cleanup(func() { stop(); <-done })

	conn, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	free := pgtest.FillDisk(t, dir)
	// The rest of each WAL segment is skipped, and a transaction id's
	// commit then needs the next segment: once none is left over, one
	// that cannot be made.
	var panicked error
	for i := 0; panicked == nil; i++ {
		if i > 20 {
			t.Fatal("commits needing new WAL segments on a full disk kept succeeding")
		}
		_, panicked = conn.Exec(ctx, "SELECT pg_switch_wal(), txid_current()")
	}
	t.Logf("the commit that needed a new WAL segment: %v", panicked)
	waitfor.True(t, "a restart to fail for lack of space", 60*time.Second, s.waitingForSpace.Load)
	// While the disk stays full it looks at the space each second and
	// does not try (and fail, and log) again.
	failures := s.failures.Load()
	checks := s.spaceChecks.Load()
	waitfor.True(t, "three looks at the free space", 10*time.Second, func() bool { return s.spaceChecks.Load() >= checks+3 })
	if got := s.failures.Load(); got != failures {
		t.Fatalf("%d restarts failed while the disk stayed full, want none after the first %d: %q", got-failures, failures, logs.Records())
	}

	freed := time.Now()
	free()
	waitfor.True(t, "the cluster to be restarted", 30*time.Second, func() bool { return s.restarts.Load() == 1 })
	if took := time.Since(freed); took > 5*time.Second {
		t.Errorf("restarted %v after the space was freed, want within about a second (and the start)", took)
	}
	if err := srv.Ping(ctx); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if s.waitingForSpace.Load() || countLogs(logs, "its disk has room again") != 1 || countLogs(logs, "its disk is full") != 1 {
		t.Errorf("logs: %q", logs.Records())
	}
}
