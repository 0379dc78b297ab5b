package pgembed

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestParseListener(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want listener
		err  error // nil: accepted; else errors.Is, or any error when errAny
	}{
		{"", listener{port: defaultPort}, nil},
		{"127.0.0.1:5433", listener{"127.0.0.1", 5433}, nil},
		{"127.0.0.2:6000", listener{"127.0.0.2", 6000}, nil},
		{"[::1]:5433", listener{"::1", 5433}, nil},
		{"0.0.0.0:5433", listener{}, ErrNotLoopback},
		{":5433", listener{}, ErrNotLoopback},
		{"[::]:5433", listener{}, ErrNotLoopback},
		{"10.0.0.1:5433", listener{}, ErrNotLoopback},
		{"localhost:5433", listener{}, ErrNotLoopback},
		{"127.0.0.1:0", listener{}, errAny},
		{"127.0.0.1:70000", listener{}, errAny},
		{"127.0.0.1", listener{}, errAny},
	} {
		got, err := parseListener(tc.addr)
		switch {
		case tc.err == nil && (err != nil || got != tc.want):
			t.Errorf("parseListener(%q) = %+v, %v; want %+v", tc.addr, got, err, tc.want)
		case tc.err == errAny && err == nil, tc.err != nil && tc.err != errAny && !errors.Is(err, tc.err):
			t.Errorf("parseListener(%q) = %+v, %v; want error %v", tc.addr, got, err, tc.err)
		}
	}
}

var errAny = errors.New("any error")

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// testDir is a directory the postgres user can reach when tests run as
// root.
func testDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cardbox-pgembed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "pg")
}

func startT(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.Running(context.Background()) {
			_ = s.Stop(context.Background())
		}
	})
	return s
}

// A cluster made without a TCP listener, even one whose pg_hba.conf
// trusts TCP as initdb --auth=trust writes it, gets one with passwords
// required when started again with TCPAddr; a process that joins it finds it
// through postmaster.pid whatever it asked for, and an owner asking for
// another listener restarts it.
func TestTCPListenerOnAnExistingCluster(t *testing.T) {
	ctx := context.Background()
	dir := testDir(t)
	s := startT(t, Options{Dir: dir})
	if s.TCPAddr() != "" {
		t.Fatalf("TCPAddr without a listener = %q", s.TCPAddr())
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// What initdb --auth=trust wrote, as clusters of earlier versions have.
	hbaPath := filepath.Join(dir, "pgdata", "pg_hba.conf")
	if err := os.WriteFile(hbaPath, []byte("local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	s = startT(t, Options{Dir: dir, TCPAddr: addr})
	if s.TCPAddr() != addr || !s.Started() {
		t.Fatalf("TCPAddr = %q (want %q), started %v", s.TCPAddr(), addr, s.Started())
	}
	mustPing(t, s.URL("postgres"))
	hba, _ := os.ReadFile(hbaPath)
	if string(hba) != hbaConf {
		t.Fatalf("pg_hba.conf = %q", hba)
	}
	for _, url := range []string{
		"postgres://" + Superuser + "@" + addr + "/postgres?sslmode=disable",
		"postgres://" + Superuser + ":guess@" + addr + "/postgres?sslmode=disable",
	} {
		if err := ping(url); err == nil || !strings.Contains(err.Error(), "password") {
			t.Errorf("superuser over TCP (%s): err = %v, want a password failure", url, err)
		}
	}

	joined := startT(t, Options{Dir: dir, Join: true})
	if joined.Started() || joined.TCPAddr() != addr {
		t.Fatalf("join: started %v, TCPAddr %q, want the running %q", joined.Started(), joined.TCPAddr(), addr)
	}
	mustPing(t, joined.URL("postgres"))

	owner := startT(t, Options{Dir: dir})
	if !owner.Started() || owner.TCPAddr() != "" {
		t.Fatalf("owner without TCP: started %v, TCPAddr %q", owner.Started(), owner.TCPAddr())
	}
	mustPing(t, owner.URL("postgres"))
	if err := ping("postgres://" + Superuser + "@" + addr + "/postgres?sslmode=disable"); err == nil {
		t.Error("TCP still answers after the restart without a listener")
	}
}

func ping(url string) error {
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(context.Background())
}

func mustPing(t *testing.T, url string) {
	t.Helper()
	if err := ping(url); err != nil {
		t.Fatalf("ping %s: %v", url, err)
	}
}
