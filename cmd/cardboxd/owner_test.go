package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// One owner per data directory, and an embedded Postgres that heals.

// embeddedDataDir is a data directory the embedded Postgres can use when
// the tests run as root (t.TempDir's parent is private).
func embeddedDataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cardboxd-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runToExit runs cardboxd with env until it exits (it must, within 30 s)
// and returns its output and error.
func runToExit(t *testing.T, env ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBinary(t))
	cmd.Env = append(os.Environ(), append([]string{"CARDBOX_LOG_LEVEL=warn"}, env...)...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("cardboxd did not exit within 30 s:\n%s", out)
	}
	return string(out), err
}

// appendOne appends a turn on srv, or fails the test.
func appendOne(t *testing.T, srv *serverProc, payload string) {
	t.Helper()
	c := srv.dial(t)
	h, err := c.CreateContext(context.Background(), 0)
	if err == nil {
		_, err = c.AppendTurn(context.Background(), &client.AppendRequest{ContextID: h.ContextID, TypeID: "t", Payload: []byte(payload)})
	}
	if err != nil {
		t.Fatalf("append: %v\n%s", err, srv.log)
	}
}

func TestSecondServerOnTheDataDirectoryExitsAtOnce(t *testing.T) {
	dataDir := embeddedDataDir(t)
	first := startServer(t, dataDir, "")
	start := time.Now()
	out, err := runToExit(t, "CARDBOX_DATA_DIR="+dataDir,
		"CARDBOX_BINARY_ADDR="+freePort(t), "CARDBOX_HTTP_ADDR="+freePort(t))
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("second server: %v, want a non-zero exit\n%s", err, out)
	}
	pid := strconv.Itoa(first.cmd.Process.Pid)
	if !strings.Contains(out, "owned by pid "+pid+": cardboxd serving") {
		t.Fatalf("second server's message does not name the first (pid %s):\n%s", pid, out)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("second server took %v to give up", took)
	}
	// The first one was not touched: its Postgres still runs, it serves.
	appendOne(t, first, "after the second server gave up")
	if err := first.stop(); err != nil {
		t.Fatalf("first server: %v\n%s", err, first.log)
	}
}

func TestPortClashFailsBeforeAnythingIsInitialised(t *testing.T) {
	dataDir := embeddedDataDir(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	out, err := runToExit(t, "CARDBOX_DATA_DIR="+dataDir,
		"CARDBOX_BINARY_ADDR="+taken.Addr().String(), "CARDBOX_HTTP_ADDR="+freePort(t))
	if err == nil || !strings.Contains(out, "binary listener") || !strings.Contains(out, "address already in use") {
		t.Fatalf("cardboxd on a taken port: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postgres")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a cluster was set up before the port clash was found (stat: %v)", err)
	}
}

// postmasterPID reads the embedded cluster's postmaster pid.
func postmasterPID(t *testing.T, dataDir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "postgres", "pgdata", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitGone polls until process pid no longer exists.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still exists 30 s after it was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKilledEmbeddedPostgresIsRestarted(t *testing.T) {
	dataDir := embeddedDataDir(t)
	srv := startServer(t, dataDir, "")
	appendOne(t, srv, "before")
	pid := postmasterPID(t, dataDir)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	// cardboxd restarts it; appends work again without a restart of
	// cardboxd.
	for deadline := time.Now().Add(60 * time.Second); ; {
		c, err := client.Dial(context.Background(), srv.binAddr)
		if err == nil {
			_, err = c.CreateContext(context.Background(), 0)
			c.Close()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no append 60 s after Postgres was killed: %v\n%s", err, srv.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if srv.cmd.ProcessState != nil {
		t.Fatalf("cardboxd exited: %v", srv.cmd.ProcessState)
	}
	if newPID := postmasterPID(t, dataDir); newPID == pid {
		t.Fatalf("postmaster pid unchanged (%d): it was not restarted", pid)
	}
	appendOne(t, srv, "after")
	if err := srv.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, srv.log)
	}
}

func TestKilledServerLeavesPostgresThatTheNextStartAdopts(t *testing.T) {
	dataDir := embeddedDataDir(t)
	srv := startServer(t, dataDir, "")
	appendOne(t, srv, "before the kill")
	srv.kill()
	pid := postmasterPID(t, dataDir)
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("the orphaned postmaster %d is gone; nothing to adopt", pid)
	}
	srv.start()
	appendOne(t, srv, "after the restart")
	if err := srv.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, srv.log)
	}
	waitGone(t, pid)
}

// TestShutdownDoesNotWaitForATricklingBody: SIGTERM while a client trickles
// a request body: the body is cut at once (it was never executing), and
// the server exits 0 well before the body's own deadline.
func TestShutdownDoesNotWaitForATricklingBody(t *testing.T) {
	srv := startServer(t, t.TempDir(), pgtest.NewDB(t))
	c, err := net.Dial("tcp", srv.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("POST /projects/p/cards HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")); err != nil {
		t.Fatal(err)
	}
	// Let the server start reading the body: another request served after
	// it means its connection was accepted and its headers read.
	if res, err := http.Get("http://" + srv.httpAddr + "/healthz"); err == nil {
		res.Body.Close()
	}
	start := time.Now()
	if err := srv.stop(); err != nil {
		t.Fatalf("cardboxd exited with %v after SIGTERM\n%s", err, srv.log)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown waited %v for a trickling body", took)
	}
}
