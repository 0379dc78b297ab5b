package connlimit_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/connlimit"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// serveEcho accepts on l until it closes, echoing one line per connection
// and closing it when the peer does.
func serveEcho(l net.Listener) <-chan error {
	done := make(chan error, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				done <- err
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return done
}

func listen(t *testing.T, opts connlimit.Options) *connlimit.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := connlimit.New(ln, opts)
	done := serveEcho(l)
	t.Cleanup(func() {
		l.Close()
		if err := <-done; !strings.Contains(err.Error(), "closed") {
			t.Errorf("Accept ended with %v, want the listener closed", err)
		}
	})
	return l
}

// echo sends a line on c and returns the answer.
func echo(c net.Conn, line string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintln(c, line); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func dial(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestLimitRefusesAndFreesSlots(t *testing.T) {
	l := listen(t, connlimit.Options{Max: 2, Refuse: func(c net.Conn) { fmt.Fprintln(c, "busy") }})
	a, b := dial(t, l.Addr()), dial(t, l.Addr())
	for _, c := range []net.Conn{a, b} {
		if got, err := echo(c, "hi"); err != nil || got != "hi\n" {
			t.Fatalf("echo = %q, %v", got, err)
		}
	}
	over := dial(t, l.Addr())
	_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(over)
	if err != nil || string(got) != "busy\n" {
		t.Fatalf("over the limit: read %q, %v; want the refusal and EOF", got, err)
	}
	if l.Refused() != 1 || l.Open() != 2 {
		t.Fatalf("refused %d, open %d; want 1, 2", l.Refused(), l.Open())
	}
	// Closing a connection frees its slot once the server side closes too.
	a.Close()
	waitfor.Soon(t, "the slot to be freed", func() bool { return l.Open() == 1 })
	if got, err := echo(dial(t, l.Addr()), "again"); err != nil || got != "again\n" {
		t.Fatalf("after a close: echo = %q, %v", got, err)
	}
}

// TestAcceptSurvivesEMFILE runs a server in a child process whose file
// descriptor limit is far below the connections the test opens: its
// Accept fails with EMFILE, and it must back off and serve again once
// connections close, instead of returning the error.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	if os.Getenv("CONNLIMIT_CHILD") == "1" {
		runChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptSurvivesEMFILE$")
	cmd.Env = append(os.Environ(), "CONNLIMIT_CHILD=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("child address: %v", err)
	}
	addr = strings.TrimSpace(addr)
	// 200 connections against a limit of 64 descriptors: the kernel
	// completes them all, the child cannot accept most.
	var conns []net.Conn
	for range 200 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		conns = append(conns, c)
	}
	if got, err := echo(conns[0], "first"); err != nil || got != "first\n" {
		t.Fatalf("first connection: echo = %q, %v", got, err)
	}
	for _, c := range conns {
		c.Close()
	}
	// The child is alive and serves a new connection.
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial after the flood: %v", err)
	}
	defer c.Close()
	if got, err := echo(c, "after"); err != nil || got != "after\n" {
		t.Fatalf("after the flood: echo = %q, %v (child exited: %v)", got, err, cmd.ProcessState)
	}
}

// runChild serves echo with at most 64 file descriptors and reports how
// Accept ended on stderr.
func runChild() {
	lim := syscall.Rlimit{Cur: 64, Max: 64}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(2)
	}
	fmt.Println(ln.Addr())
	err = <-serveEcho(connlimit.New(ln, connlimit.Options{}))
	fmt.Fprintln(os.Stderr, "accept ended:", err)
	os.Exit(3)
}
