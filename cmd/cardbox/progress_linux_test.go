package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/cli/clitest"
)

// `cardbox bench` shows what it is doing on a terminal before its long
// first step (probing the machine), and nothing of it when its stderr is
// not one.
func TestBenchShowsProgressOnATerminalOnly(t *testing.T) {
	args := []string{"bench", "--data-dir", t.TempDir(), "--binary-addr", freeAddr(t), "--http-addr", freeAddr(t)}
	master, tty := clitest.PTY(t)
	done := make(chan error, 1)
	go func() { done <- cli.Run(context.Background(), commands(), args, &bytes.Buffer{}, tty) }()
	if err := master.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := master.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "probing the machine") {
		t.Errorf("the terminal first got %q (%v), want the machine probe's progress", buf[:n], err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "connect") {
		t.Errorf("bench without a server: %v", err)
	}

	var stderr bytes.Buffer
	if err := cli.Run(context.Background(), commands(), args, &bytes.Buffer{}, &stderr); err == nil {
		t.Error("bench without a server: no error")
	}
	if strings.Contains(stderr.String(), "\r") || strings.Contains(stderr.String(), "probing") {
		t.Errorf("off a terminal bench showed progress: %q", stderr.String())
	}
}
