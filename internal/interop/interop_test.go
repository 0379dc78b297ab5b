// Package interop drives a real cardboxd with the unmodified official CXDB
// Go client.
package interop

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	cxdb "github.com/strongdm/ai-cxdb/clients/go"
)

// server is a cardboxd built from this repository, on an embedded
// Postgres in a fresh data directory.
type server struct {
	binAddr  string
	httpAddr string
	env      []string // the server's configuration, for the CLI
	cmd      *exec.Cmd
	log      bytes.Buffer
	stopOnce sync.Once
}

// build builds a command of this repository into a temporary directory.
func build(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// startServer runs cardboxd on a new data directory, with TLS when certs
// is not nil and the extra environment variables env.
func startServer(t *testing.T, certs *testCerts, env ...string) *server {
	t.Helper()
	return startServerIn(t, newDataDir(t), certs, env...)
}

// newDataDir is an empty data directory, removed at cleanup.
func newDataDir(t *testing.T) string {
	t.Helper()
	dataDir, err := os.MkdirTemp("", "cardbox-interop-") // world-searchable parent, for postgres as another user
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	if err := os.Chmod(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dataDir
}

// startServerIn is startServer on the data directory dataDir.
func startServerIn(t *testing.T, dataDir string, certs *testCerts, env ...string) *server {
	t.Helper()
	bin := build(t, "./cmd/cardboxd")
	s := &server{binAddr: freeAddr(t), httpAddr: freeAddr(t)}
	s.env = append(os.Environ(), "CARDBOX_DATA_DIR="+dataDir, "CARDBOX_DATABASE_URL=",
		"CARDBOX_BINARY_ADDR="+s.binAddr, "CARDBOX_HTTP_ADDR="+s.httpAddr, "CARDBOX_LOG_LEVEL=warn")
	s.env = append(s.env, env...)
	s.cmd = exec.Command(bin)
	s.cmd.Env = s.env
	health, hc := "http://"+s.httpAddr+"/healthz", http.DefaultClient
	if certs != nil {
		s.cmd.Env = append(s.cmd.Env, "CARDBOX_TLS_CERT="+certs.certFile, "CARDBOX_TLS_KEY="+certs.keyFile)
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: certs.pool}
		t.Cleanup(tr.CloseIdleConnections)
		health, hc = "https://"+s.httpAddr+"/healthz", &http.Client{Transport: tr}
	}
	s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := hc.Get(health)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cardboxd not healthy after 60 s:\n%s", s.log.String())
		}
	}
}

// stop ends the server (SIGTERM) and waits for it to exit; once is
// enough, later calls do nothing.
func (s *server) stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		_ = s.cmd.Wait()
	})
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

// msgpackMap is {1: s}: a msgpack map with one numeric tag.
func msgpackMap(s string) []byte {
	return append([]byte{0x81, 0x01, 0xa0 | byte(len(s))}, s...)
}

func TestOfficialGoClient(t *testing.T) {
	s := startServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cxdb.Dial(s.binAddr, cxdb.WithClientTag("interop"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var last *cxdb.AppendResult
	for i := range 3 {
		last, err = c.AppendTurn(ctx, &cxdb.AppendRequest{
			ContextID: head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3,
			Payload: msgpackMap(fmt.Sprint("turn ", i)), IdempotencyKey: fmt.Sprint("k", i),
		})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	again, err := c.AppendTurn(ctx, &cxdb.AppendRequest{
		ContextID: head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3,
		Payload: msgpackMap("turn 2"), IdempotencyKey: "k2",
	})
	if err != nil || again.TurnID != last.TurnID {
		t.Fatalf("idempotent repeat: %+v, %v; want turn %d", again, err, last.TurnID)
	}
	for _, withPayload := range []bool{true, false} {
		turns, err := c.GetLast(ctx, head.ContextID, cxdb.GetLastOptions{Limit: 10, IncludePayload: withPayload})
		if err != nil || len(turns) != 3 {
			t.Fatalf("GetLast(include_payload=%v): %d turns, %v", withPayload, len(turns), err)
		}
		if withPayload && !bytes.Equal(turns[2].Payload, msgpackMap("turn 2")) {
			t.Fatalf("GetLast payload = %x", turns[2].Payload)
		}
	}
	// A turn with an empty payload last: the answer the client used to
	// fail with EOF.
	if _, err := c.AppendTurn(ctx, &cxdb.AppendRequest{ContextID: head.ContextID, TypeID: "t", TypeVersion: 1}); err != nil {
		t.Fatal(err)
	}
	if turns, err := c.GetLast(ctx, head.ContextID, cxdb.GetLastOptions{Limit: 10, IncludePayload: true}); err != nil || len(turns) != 4 {
		t.Fatalf("GetLast with an empty last payload: %d turns, %v", len(turns), err)
	}
	fork, err := c.ForkContext(ctx, last.TurnID)
	if err != nil || fork.HeadTurnID != last.TurnID {
		t.Fatalf("fork: %+v, %v", fork, err)
	}
	if h, err := c.GetHead(ctx, fork.ContextID); err != nil || h.HeadTurnID != last.TurnID {
		t.Fatalf("GetHead of the fork: %+v, %v", h, err)
	}
	if _, err := c.GetHead(ctx, fork.ContextID+1000); err == nil {
		t.Fatal("GetHead of an unknown context succeeded")
	}
}
