package cli_test

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/cli/clitest"
)

// On a terminal the status line is shown, rewritten in place, and left
// with its last line.
func TestProgressOnATerminal(t *testing.T) {
	master, tty := clitest.PTY(t)
	p := cli.NewProgress(tty)
	if !p.On() {
		t.Fatal("a pseudo-terminal is not taken for a terminal")
	}
	p.Show("step %d", 1)
	p.Done("finished")
	if err := master.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(master).ReadString('\n')
	if err != nil || !strings.Contains(line, "\rstep 1") || !strings.Contains(line, "\rfinished") {
		t.Fatalf("terminal got %q (%v)", line, err)
	}
}
