package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/cli/clitest"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

func TestHelpFormat(t *testing.T) {
	clitest.CheckHelp(t, command())
}

// `cardboxd --help` says what each row of the README's configuration
// table says: flag, variable, default and meaning.
func TestHelpAgreesWithTheREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var help bytes.Buffer
	if code := cli.Execute(context.Background(), command(), []string{"--help"}, &help, &help); code != 0 {
		t.Fatalf("--help: exit %d\n%s", code, help.String())
	}
	rows := 0
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) != 4 || !strings.HasPrefix(line, "| `--") {
			continue
		}
		rows++
		flag, env := strings.Trim(cells[0], "| `"), strings.Trim(cells[1], "`")
		def := strings.Trim(cells[2], "`()")
		var notes []string
		if def != "empty" {
			notes = append(notes, "default "+def)
		}
		notes = append(notes, "env "+env)
		meaning := config.PlainText(strings.TrimSuffix(cells[3], " |"))
		want := "\n        " + meaning + " (" + strings.Join(notes, "; ") + ")\n"
		at := strings.Index(help.String()+"\n", "\n  "+flag+"\n")
		if typed := strings.Index(help.String(), "\n  "+flag+" "); at < 0 {
			at = typed
		}
		if at < 0 || !strings.HasPrefix(afterLine(help.String()[at+1:]), strings.TrimPrefix(want, "\n")) {
			t.Errorf("cardboxd --help does not say what the README says of %s:%s", flag, want)
		}
	}
	if rows != len(config.Names()) {
		t.Errorf("the README's table has %d rows, the settings %d", rows, len(config.Names()))
	}
}

// afterLine is s from its second line on.
func afterLine(s string) string {
	_, rest, _ := strings.Cut(s, "\n")
	return rest
}

// Values that make no sense stop cardboxd before it starts, naming the
// flag: one line and the usage line on stderr, exit 2.
func TestNonsenseValuesAreRefusedAtStartUp(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  [2]string
		want string
	}{
		{args: []string{"--max-conns", "-5"}, want: "cardboxd: --max-conns -5: must be above 0\nUsage: cardboxd [flags]\n"},
		{env: [2]string{"CARDBOX_MAX_CONNS", "-5"}, want: "cardboxd: CARDBOX_MAX_CONNS=-5 (--max-conns): must be above 0\nUsage: cardboxd [flags]\n"},
		{args: []string{"--idle-timeout", "-1s"}, want: "cardboxd: --idle-timeout -1s: must be above 0\nUsage: cardboxd [flags]\n"},
		{args: []string{"--segment-size", "0"}, want: "cardboxd: --segment-size 0: must be above 0\nUsage: cardboxd [flags]\n"},
		{args: []string{"--segment-size", "-1"}, want: "cardboxd: --segment-size -1: must be above 0\nUsage: cardboxd [flags]\n"},
		{args: []string{"--tenant-memory-share", "2"}, want: "cardboxd: --tenant-memory-share 2: must be above 0 and at most 1\nUsage: cardboxd [flags]\n"},
		{args: []string{"--tenant-quota-bytes", "-1"}, want: "cardboxd: --tenant-quota-bytes -1: must not be negative\nUsage: cardboxd [flags]\n"},
		{args: []string{"--erase-within", "0s"}, want: "cardboxd: --erase-within 0s: must be above 0\nUsage: cardboxd [flags]\n"},
		{args: []string{"--erase-within", "-24h"}, want: "cardboxd: --erase-within -24h0m0s: must be above 0\nUsage: cardboxd [flags]\n"},
		{args: []string{"--compaction-rate", "0"}, want: "cardboxd: --compaction-rate 0: must be above 0\nUsage: cardboxd [flags]\n"},
		{env: [2]string{"CARDBOX_COMPACTION_RATE", "-1"}, want: "cardboxd: CARDBOX_COMPACTION_RATE=-1 (--compaction-rate): must be above 0\nUsage: cardboxd [flags]\n"},
		{args: []string{"--compaction-threshold", "0"}, want: "cardboxd: --compaction-threshold 0: must be above 0 and at most 1\nUsage: cardboxd [flags]\n"},
		{args: []string{"--compaction-threshold", "1.5"}, want: "cardboxd: --compaction-threshold 1.5: must be above 0 and at most 1\nUsage: cardboxd [flags]\n"},
		{args: []string{"--mode", "open"}, want: "cardboxd: --mode open: want dev or hosted\nUsage: cardboxd [flags]\n"},
		{args: []string{"--retention-idle", "0"}, want: "cardboxd: invalid value \"0\" for --retention-idle: must be at least 1s (empty: none)\nUsage: cardboxd [flags]\n"},
		{env: [2]string{"CARDBOX_RETENTION_MAX_AGE", "-2d"}, want: "cardboxd: CARDBOX_RETENTION_MAX_AGE=\"-2d\" (--retention-max-age): must be at least 1s (empty: none)\nUsage: cardboxd [flags]\n"},
		{args: []string{"--nope"}, want: "cardboxd: unknown flag --nope\nUsage: cardboxd [flags]\n"},
	} {
		if tt.env[0] != "" {
			t.Setenv(tt.env[0], tt.env[1])
		}
		var stdout, stderr bytes.Buffer
		code := cli.Execute(context.Background(), command(), tt.args, &stdout, &stderr)
		if code != 2 || stderr.String() != tt.want || stdout.Len() > 0 {
			t.Errorf("cardboxd %v %v: exit %d, stderr %q; want 2 and %q", tt.args, tt.env, code, stderr.String(), tt.want)
		}
		if tt.env[0] != "" {
			os.Unsetenv(tt.env[0])
		}
	}
}

// The real binary exits 2 on --max-conns -5, before it touches the data
// directory.
func TestBinaryRefusesNegativeMaxConns(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(serverBinary(t), "--max-conns", "-5", "--data-dir", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.HasPrefix(stderr.String(), "cardboxd: --max-conns -5: must be above 0\n") {
		t.Fatalf("exit %v, stderr %q", err, stderr.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("the data directory was touched: %v", entries)
	}
}
