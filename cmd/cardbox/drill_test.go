package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/testbin"
)

// TestRestoreDrillAsDocumented runs the restore drill of
// docs/operations.md, its shell block as written, beside a running
// server with its embedded Postgres, in a shell with the server's
// settings (its analysts' SQL address among them): only the backup
// directory, the drill's directory and the drill server's ports are
// moved into the test's own. Every command must succeed, and the turns
// the manifest, `cardbox verify` and the restored server count agree
// with the turns the server acknowledged before the drill.
func TestRestoreDrillAsDocumented(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real server processes")
	}
	script := drillScript(t)
	bins := testbin.Build(t, "./cmd/cardboxd", "./cmd/cardbox")
	root := tempDir(t)
	dataDir := filepath.Join(root, "data")
	sqlAddr := freeAddr(t)
	srv := startCardboxd(t, bins, dataDir, "CARDBOX_SQL_ADDR="+sqlAddr)
	c := dialClient(t, srv.binAddr)
	ctx := context.Background()
	const turns = 20
	for i := range turns {
		h, err := c.CreateContext(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.AppendTurn(ctx, &client.AppendRequest{
			ContextID: h.ContextID, TypeID: "test.Turn", TypeVersion: 1, Payload: fmt.Appendf(nil, "turn %d of the drill", i),
		}); err != nil {
			t.Fatal(err)
		}
	}

	drillAddr, drillHTTP := freeAddr(t), freeAddr(t)
	script = strings.NewReplacer(
		"/backups/cardbox", filepath.Join(root, "backups", "cardbox"),
		"/tmp/cardbox-drill", filepath.Join(root, "cardbox-drill"),
		"127.0.0.1:19009", drillAddr,
		"127.0.0.1:19010", drillHTTP,
	).Replace(script)
	// The output goes to a file, not a pipe: a server the script left
	// running (a step failed before its kill) must not hold the test.
	outFile, err := os.Create(filepath.Join(root, "drill.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd := exec.Command("bash", "-e", "-u", "-o", "pipefail", "-c", script)
	cmd.Env = append(cliEnv(), "PATH="+bins+string(os.PathListSeparator)+os.Getenv("PATH"),
		"CARDBOX_DATA_DIR="+dataDir, "CARDBOX_BINARY_ADDR="+srv.binAddr, "CARDBOX_HTTP_ADDR="+srv.httpAddr,
		"CARDBOX_SQL_ADDR="+sqlAddr, "CARDBOX_LOG_LEVEL=warn", "CARDBOX_ACCESS_LOG=false")
	cmd.Stdout, cmd.Stderr = outFile, outFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Whatever the script left running stops with the test (cardboxd
	// stops its embedded Postgres on SIGTERM).
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) })
	err = cmd.Wait()
	out, rerr := os.ReadFile(outFile.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("the drill failed: %v\n%s", err, out)
	}
	t.Logf("the drill printed:\n%s", out)
	for _, want := range []string{"no defects", `"context_id"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the drill's output does not say %q", want)
		}
	}
	for _, counted := range []*regexp.Regexp{
		regexp.MustCompile(`"turns": (\S+),`), regexp.MustCompile(`postgres: (\S+) turns`), regexp.MustCompile(`(?m)^cardbox_turns (\S+)$`),
	} {
		m := counted.FindSubmatch(out)
		if m == nil {
			t.Errorf("the drill's output has no %s", counted)
			continue
		}
		if n, err := strconv.ParseFloat(string(m[1]), 64); err != nil || n != turns {
			t.Errorf("%s: %s, want %d", counted, m[1], turns)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "cardbox-drill")); !os.IsNotExist(err) {
		t.Errorf("the drill's directory is still there (%v)", err)
	}
}

// drillScript returns the shell block of docs/operations.md's restore
// drill.
func drillScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, section, ok := strings.Cut(doc, "\n### The restore drill\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "### The restore drill" section`)
	}
	_, block, ok := strings.Cut(section, "\n```sh\n")
	if !ok {
		t.Fatal("the restore drill has no ```sh block")
	}
	block, _, ok = strings.Cut(block, "\n```\n")
	if !ok {
		t.Fatal("the restore drill's ```sh block does not end")
	}
	return block
}
