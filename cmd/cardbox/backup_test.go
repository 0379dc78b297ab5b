package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/backup"
	"github.com/cardboxhq/cardbox/internal/testbin"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// TestBackupUnderLoadRestores backs a real server with its embedded
// Postgres up twice while 64 connections append with idempotency keys
// (the second backup into the same directory, incremental, after a
// backup killed with -9 midway), kills the server and its Postgres, and
// restores each backup into a new directory: `cardbox verify` finds no
// defect, every turn acknowledged before the backup began is there with
// its bytes, and every turn there is whole, one that was sent. A flipped
// byte, a missing file and an incomplete backup are refused.
func TestBackupUnderLoadRestores(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real server processes")
	}
	bins := testbin.Build(t, "./cmd/cardboxd", "./cmd/cardbox")
	root := tempDir(t)
	dataDir, dest, first := filepath.Join(root, "data"), filepath.Join(root, "backup"), filepath.Join(root, "first")
	srv := startCardboxd(t, bins, dataDir)
	load := startLoad(t, srv.binAddr, 64)

	start := time.Now()
	load.waitFor(t, 1000)
	t.Logf("%v: 1000 appends acknowledged", time.Since(start))
	before1 := load.ackedSoFar()
	run(t, bins, "backup", dest, "--data-dir", dataDir)
	copyDir(t, dest, first)

	load.waitFor(t, len(before1)+1000)
	killedBackupLeavesPrevious(t, bins, dataDir, dest)
	before2 := load.ackedSoFar()
	run(t, bins, "backup", dest, "--data-dir", dataDir)
	load.stop(t)
	srv.killWithPostgres(t, dataDir)
	t.Logf("%v: two backups taken, server and Postgres killed", time.Since(start))

	m, err := backup.ReadManifest(dest)
	if err != nil {
		t.Fatal(err)
	}
	if m.Copied == 0 || m.Copied > m.Committed.Pack+m.Committed.TurnLog {
		t.Fatalf("second backup copied %d bytes of %d", m.Copied, m.Committed.Pack+m.Committed.TurnLog)
	}
	for _, tc := range []struct {
		src   string
		acked []ackedTurn
	}{{first, before1}, {dest, before2}} {
		restored := filepath.Join(root, "restored-"+filepath.Base(tc.src))
		run(t, bins, "restore", tc.src, restored)
		if out := run(t, bins, "verify", "--data-dir", restored); !strings.Contains(out, "no defects") {
			t.Fatalf("verify of the restored %s: %s", tc.src, out)
		}
		again := startCardboxd(t, bins, restored)
		checkRestored(t, again.binAddr, load, tc.acked)
		again.stop(t)
		t.Logf("%v: %s restored and checked", time.Since(start), tc.src)
	}
	refusesDamage(t, bins, first, root)
}

// killedBackupLeavesPrevious kill -9s a slow backup once it has begun
// writing: the directory still holds the previous backup, whole.
func killedBackupLeavesPrevious(t *testing.T, bins, dataDir, dest string) {
	t.Helper()
	before, err := backup.ReadManifest(dest)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bins, "cardbox"), "backup", dest, "--data-dir", dataDir, "--rate", "65536")
	cmd.Env = cliEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// It writes the database's dump and the files' segments under
	// temporary names (the dump may come first, slowly on a busy machine).
	waitfor.True(t, "the backup to write its dump or a segment", 90*time.Second, func() bool {
		dump, _ := filepath.Glob(filepath.Join(dest, "db", "*.tmp"))
		segments, _ := filepath.Glob(filepath.Join(dest, "data", "*.tmp"))
		return len(dump)+len(segments) > 0
	})
	cmd.Process.Kill()
	cmd.Wait()
	after, err := backup.ReadManifest(dest)
	if err != nil || after.Created != before.Created {
		t.Fatalf("after a killed backup the directory holds %+v (%v), want the previous backup", after, err)
	}
	if err := backup.Check(context.Background(), dest, after, nil); err != nil {
		t.Fatalf("the previous backup after a killed one: %v", err)
	}
}

// refusesDamage checks that restore refuses a backup with a flipped
// byte, a missing file or no manifest, naming what is wrong, and leaves
// no data directory behind.
func refusesDamage(t *testing.T, bins, good, root string) {
	t.Helper()
	m, err := backup.ReadManifest(good)
	if err != nil {
		t.Fatal(err)
	}
	seg := m.Files[1].Segments[0].Name // the turn log
	for _, tc := range []struct {
		name   string
		damage func(dir string)
		want   string
	}{
		{"flipped byte", func(dir string) { flipByte(t, filepath.Join(dir, seg), 1000) }, seg + " has BLAKE3"},
		{"missing dump", func(dir string) { os.Remove(filepath.Join(dir, m.Database.Dump.Name)) }, m.Database.Dump.Name + " is missing"},
		{"no manifest", func(dir string) { os.Remove(filepath.Join(dir, backup.ManifestFile)) }, "not a cardbox backup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(root, "damaged-"+strings.ReplaceAll(tc.name, " ", "-"))
			copyDir(t, good, src)
			tc.damage(src)
			target := filepath.Join(root, "target-"+strings.ReplaceAll(tc.name, " ", "-"))
			out, err := runErr(bins, "restore", src, target)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Fatalf("restore of a backup with a %s: %v\n%s\nwant %q", tc.name, err, out, tc.want)
			}
			if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused restore left %s behind (%v)", target, err)
			}
		})
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// tempDir is a directory the embedded Postgres, which runs as another
// user when the tests run as root, can enter (t.TempDir's parent is
// private).
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cardbox-backup-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// cliEnv is the environment of the commands: the embedded Postgres, the
// default throttle.
func cliEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CARDBOX_BACKUP_RATE=") {
			env = append(env, kv)
		}
	}
	return append(env, "CARDBOX_DATABASE_URL=")
}

// run runs a cardbox command and fails the test unless it succeeds.
func run(t *testing.T, bins string, args ...string) string {
	t.Helper()
	out, err := runErr(bins, args...)
	if err != nil {
		t.Fatalf("cardbox %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func runErr(bins string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(bins, "cardbox"), args...)
	cmd.Env = cliEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
}

// cardboxd is a real server process with its embedded Postgres.
type cardboxd struct {
	cmd               *exec.Cmd
	binAddr, httpAddr string
	log               *testbin.Output
}

// startCardboxd starts cardboxd on dataDir with its embedded Postgres, or
// with what env adds to the environment (CARDBOX_DATABASE_URL=...).
func startCardboxd(t *testing.T, bins, dataDir string, env ...string) *cardboxd {
	t.Helper()
	s := &cardboxd{binAddr: freeAddr(t), httpAddr: freeAddr(t), log: &testbin.Output{}}
	s.cmd = exec.Command(filepath.Join(bins, "cardboxd"))
	s.cmd.Env = append(cliEnv(), "CARDBOX_DATA_DIR="+dataDir, "CARDBOX_BINARY_ADDR="+s.binAddr,
		"CARDBOX_HTTP_ADDR="+s.httpAddr, "CARDBOX_LOG_LEVEL=warn", "CARDBOX_ACCESS_LOG=false")
	s.cmd.Env = append(s.cmd.Env, env...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Signal(syscall.SIGTERM)
			s.cmd.Wait()
		}
	})
	waitfor.True(t, "cardboxd to be healthy", 60*time.Second, func() bool {
		if s.cmd.ProcessState != nil {
			t.Fatalf("cardboxd exited:\n%s", s.log)
		}
		resp, err := http.Get("http://" + s.httpAddr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

func (s *cardboxd) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("cardboxd stop: %v\n%s", err, s.log)
	}
}

// killWithPostgres kill -9s the server and then its embedded postmaster.
func (s *cardboxd) killWithPostgres(t *testing.T, dataDir string) {
	t.Helper()
	pidFile := filepath.Join(dataDir, "postgres", "pgdata", "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "the postmaster to die", 30*time.Second, func() bool {
		return syscall.Kill(pid, 0) != nil
	})
}

// ackedTurn is an append the server acknowledged.
type ackedTurn struct {
	contextID, turnID uint64
	payload           []byte
}

// appendLoad is writers appending with idempotency keys until stopped.
type appendLoad struct {
	mu       sync.Mutex
	acked    []ackedTurn
	sent     map[string]bool // every payload sent
	errs     []error
	contexts []uint64
	done     chan struct{}
	wg       sync.WaitGroup
}

func startLoad(t *testing.T, addr string, conns int) *appendLoad {
	t.Helper()
	l := &appendLoad{sent: map[string]bool{}, done: make(chan struct{})}
	ctx := context.Background()
	for range 16 {
		c := dialClient(t, addr)
		h, err := c.CreateContext(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		l.contexts = append(l.contexts, h.ContextID)
	}
	for w := range conns {
		c := dialClient(t, addr)
		l.wg.Go(func() { l.write(c, w) })
	}
	t.Cleanup(func() { l.stop(t) })
	return l
}

func (l *appendLoad) write(c *client.Client, w int) {
	for i := 0; ; i++ {
		select {
		case <-l.done:
			return
		default:
		}
		payload := fmt.Appendf(nil, "writer %d turn %d %s", w, i, bytes.Repeat([]byte{byte('a' + w%26)}, (w*131+i*17)%2048))
		req := &client.AppendRequest{
			ContextID: l.contexts[(w+i)%len(l.contexts)], TypeID: "test.Turn", TypeVersion: 1,
			Payload: payload, IdempotencyKey: fmt.Sprintf("w%d-%d", w, i),
		}
		l.mu.Lock()
		l.sent[string(payload)] = true
		l.mu.Unlock()
		res, err := c.AppendTurn(context.Background(), req)
		l.mu.Lock()
		if err != nil {
			l.errs = append(l.errs, err)
			l.mu.Unlock()
			return
		}
		l.acked = append(l.acked, ackedTurn{contextID: res.ContextID, turnID: res.NewTurnID, payload: payload})
		l.mu.Unlock()
	}
}

func (l *appendLoad) ackedSoFar() []ackedTurn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ackedTurn(nil), l.acked...)
}

func (l *appendLoad) waitFor(t *testing.T, n int) {
	t.Helper()
	waitfor.True(t, fmt.Sprintf("%d acknowledged appends", n), 60*time.Second, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.errs) > 0 {
			t.Fatalf("an append failed: %v", l.errs[0])
		}
		return len(l.acked) >= n
	})
}

// stop ends the writers and fails the test if an append failed while
// the server ran.
func (l *appendLoad) stop(t *testing.T) {
	t.Helper()
	select {
	case <-l.done:
		return
	default:
	}
	close(l.done)
	l.wg.Wait()
	if len(l.errs) > 0 {
		t.Errorf("%d appends failed while the server ran: %v", len(l.errs), l.errs[0])
	}
}

func dialClient(t *testing.T, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// checkRestored reads every context of the restored server: each turn
// acknowledged before the backup began is there with its bytes, depths
// run 1..n without a gap, and every turn's payload is one a writer sent
// whole.
func checkRestored(t *testing.T, addr string, l *appendLoad, acked []ackedTurn) {
	t.Helper()
	c := dialClient(t, addr)
	stored := map[uint64][]byte{}
	for _, id := range l.contexts {
		turns, err := c.GetLast(context.Background(), id, 1_000_000, true)
		if err != nil {
			t.Fatalf("get last %d: %v", id, err)
		}
		for i, tr := range turns {
			if tr.Depth != uint32(i+1) {
				t.Fatalf("context %d: turn %d at position %d has depth %d", id, tr.TurnID, i, tr.Depth)
			}
			if !l.sent[string(tr.Payload)] {
				t.Fatalf("context %d: turn %d holds a payload no writer sent (%d bytes)", id, tr.TurnID, len(tr.Payload))
			}
			stored[tr.TurnID] = tr.Payload
		}
	}
	for _, a := range acked {
		got, ok := stored[a.turnID]
		if !ok {
			t.Fatalf("turn %d (context %d), acknowledged before the backup began, is not in the restored store", a.turnID, a.contextID)
		}
		if !bytes.Equal(got, a.payload) {
			t.Fatalf("turn %d restored as %q, acknowledged as %q", a.turnID, got, a.payload)
		}
	}
	t.Logf("restored %d turns; %d were acknowledged before the backup began", len(stored), len(acked))
}
