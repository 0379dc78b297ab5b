// Package cardboxd runs a real cardboxd for the SDK's tests: built once
// per test binary from the repository the sdk module sits in, started on
// free ports with a data directory of its own and its embedded Postgres,
// and stopped (with that Postgres) when the test ends.
package cardboxd

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
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
)

var build struct {
	once sync.Once
	dir  string
	err  error
}

// Binary returns the path of cardboxd, built on first use from the
// repository the sdk module sits in (its parent directory).
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		build.dir, build.err = goBuild()
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return filepath.Join(build.dir, "cardboxd")
}

// RemoveBuild removes the built binary; call it from TestMain after
// m.Run.
func RemoveBuild() {
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
}

func goBuild() (string, error) {
	sdk, err := sdkDir()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "cardbox-sdk-bin-")
	if err != nil {
		return "", err
	}
	// Built inside the parent module: a package of another module cannot
	// be named from this one.
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "cardboxd"), "./cmd/cardboxd")
	cmd.Dir = filepath.Dir(sdk)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go build cardboxd: %v\n%s", err, out)
	}
	return dir, nil
}

// sdkDir is the directory of the sdk module's go.mod above the working
// directory.
func sdkDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/cardboxhq/cardbox/sdk\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no sdk go.mod above the working directory")
		}
		dir = parent
	}
}

// Server is a running (or killed) cardboxd.
type Server struct {
	t        testing.TB
	DataDir  string
	BinAddr  string
	HTTPURL  string
	httpAddr string
	env      []string
	cmd      *exec.Cmd
	log      *output
}

// Start runs a dev-mode cardboxd (no keys) with extra environment
// variables, and waits until it is healthy.
func Start(t testing.TB, env ...string) *Server {
	t.Helper()
	// Not t.TempDir: as root, the embedded Postgres runs as another user,
	// who must be able to reach the directory.
	dir, err := os.MkdirTemp("", "cardbox-sdk-data-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, DataDir: dir, BinAddr: freePort(t), httpAddr: freePort(t)}
	s.HTTPURL = "http://" + s.httpAddr
	s.env = append(os.Environ(),
		"CARDBOX_DATA_DIR="+dir, "CARDBOX_DATABASE_URL=",
		"CARDBOX_BINARY_ADDR="+s.BinAddr, "CARDBOX_HTTP_ADDR="+s.httpAddr,
		"CARDBOX_LOG_LEVEL=warn", "CARDBOX_ACCESS_LOG=false")
	s.env = append(s.env, env...)
	t.Cleanup(func() {
		s.Stop()
		s.stopPostgres()
		os.RemoveAll(dir)
	})
	s.Restart()
	return s
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Restart starts the server process (again, after Kill) on the same data
// directory and ports, and waits until it is healthy.
func (s *Server) Restart() {
	s.t.Helper()
	s.log = &output{}
	s.cmd = exec.Command(Binary(s.t))
	s.cmd.Env = s.env
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.HTTPURL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if s.cmd.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling health: nothing to wait on
	}
	s.t.Fatalf("cardboxd not healthy after 90 s:\n%s", s.log)
}

// Kill sends SIGKILL to the server (its Postgres lives on, and the next
// Restart adopts it).
func (s *Server) Kill() {
	s.t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		s.t.Fatal(err)
	}
	_ = s.cmd.Wait()
}

// Stop ends the server with SIGTERM (it stops its Postgres), if running.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// Log is what the server printed since its last start.
func (s *Server) Log() string { return s.log.String() }

// stopPostgres ends an embedded Postgres a killed server left running
// (immediate shutdown by its postmaster.pid).
func (s *Server) stopPostgres() {
	f, err := os.Open(filepath.Join(s.DataDir, "postgres", "postmaster.pid"))
	if err != nil {
		return
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 1 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	for range 200 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling the process: nothing to wait on
	}
}

type output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
