package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testbin"
)

// serverBinary is cardboxd, built once per test binary.
func serverBinary(t testing.TB) string {
	t.Helper()
	return testbin.Command(t, "./cmd/cardboxd")
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer runs a real cardboxd on a fresh database and returns its
// binary and HTTP addresses once it serves; it stops when the test ends.
func startServer(t *testing.T, databaseURL string) (binAddr, httpAddr string) {
	t.Helper()
	binAddr, httpAddr = freeAddr(t), freeAddr(t)
	cmd := exec.Command(serverBinary(t), "--data-dir", t.TempDir(), "--database-url", databaseURL,
		"--binary-addr", binAddr, "--http-addr", httpAddr, "--access-log=false")
	cmd.Env = os.Environ()
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serving := make(chan string, 1)
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "cardboxd serving") {
				serving <- ""
			}
		}
		serving <- log.String()
		io.Copy(io.Discard, logs)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	if out := <-serving; out != "" {
		t.Fatalf("cardboxd stopped before serving:\n%s", out)
	}
	return binAddr, httpAddr
}

// `cardbox sample` writes to the server that CARDBOX_BINARY_ADDR and
// CARDBOX_HTTP_ADDR name, as the server reads them.
func TestSampleReadsTheServersAddresses(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.NewPoolAndURL(t)
	binAddr, httpAddr := startServer(t, url)
	t.Setenv("CARDBOX_BINARY_ADDR", binAddr)
	t.Setenv("CARDBOX_HTTP_ADDR", httpAddr)
	out, err := cardbox(ctx, "sample", "--contexts", "2", "--turns", "4")
	if err != nil || !strings.HasPrefix(out, "wrote 2 conversations") {
		t.Fatalf("cardbox sample: %q, %v", out, err)
	}
	var contexts int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM contexts").Scan(&contexts); err != nil || contexts != 2 {
		t.Errorf("%d contexts in the server's database (%v), want 2", contexts, err)
	}
}

// Every client command dials the addresses the server's variables name
// (a flag wins): each test listener sees the command arrive.
func TestClientsReadTheServersVariables(t *testing.T) {
	for _, tt := range []struct {
		args []string
		http bool // the command's first call is HTTP, else binary
	}{
		{args: []string{"bench", "--data-dir", t.TempDir() + "/none"}, http: true},
		{args: []string{"bench-http"}, http: true},
		{args: []string{"bench-tenants", "--victim-key", "a", "--noisy-key", "b"}},
		{args: []string{"health"}, http: true},
		{args: []string{"sample"}, http: true},
	} {
		arrived := make(chan string, 16)
		web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived <- "http " + r.URL.Path
			http.Error(w, "no", http.StatusTeapot)
		}))
		t.Cleanup(web.Close)
		bin, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bin.Close() })
		go func() {
			for {
				c, err := bin.Accept()
				if err != nil {
					return
				}
				arrived <- "binary"
				c.Close()
			}
		}()
		t.Setenv("CARDBOX_HTTP_ADDR", strings.TrimPrefix(web.URL, "http://"))
		t.Setenv("CARDBOX_BINARY_ADDR", bin.Addr().String())
		_, err = cardbox(context.Background(), tt.args...)
		if err == nil {
			t.Errorf("%v: no error from the stand-in listeners", tt.args)
		}
		select {
		case got := <-arrived:
			if strings.HasPrefix(got, "http") != tt.http {
				t.Errorf("%v: first arrived %s", tt.args, got)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%v: nothing arrived at the variables' addresses (%v)", tt.args, err)
		}
		web.Close()
		bin.Close()
	}
}
