package main

import (
	"os"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cmd/internal/cli/clitest"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

// Every command and subcommand of the dispatch table answers --help and
// -h in the one format.
func TestEveryCommandAnswersHelp(t *testing.T) {
	clitest.CheckHelp(t, commands())
}

// A command called wrongly prints one line naming what is wrong and its
// usage line, on stderr, and exits 2.
func TestCalledWronglyPrintsOneLineAndTheUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{args: nil, want: "cardbox: want a command: "},
		{args: []string{"nope"}, want: "cardbox: unknown command \"nope\" (commands: "},
		{args: []string{"--nope"}, want: "cardbox: unknown flag \"--nope\" (commands: "},
		{args: []string{"bench", "--nope"}, want: "cardbox bench: unknown flag --nope\nUsage: cardbox bench [flags]\n"},
		{args: []string{"bench", "--conns", "x"}, want: "cardbox bench: invalid value \"x\" for --conns: parse error\nUsage: cardbox bench [flags]\n"},
		{args: []string{"bench", "--conns", "-5"}, want: "cardbox bench: --conns -5: must be above 0\nUsage: cardbox bench [flags]\n"},
		{args: []string{"bench", "--duration", "-1s"}, want: "cardbox bench: --duration -1s: must be above 0\nUsage: cardbox bench [flags]\n"},
		{args: []string{"bench", "--conns"}, want: "cardbox bench: --conns needs a value\nUsage: cardbox bench [flags]\n"},
		{args: []string{"sample", "--turns", "1"}, want: "cardbox sample: --turns 1: must be at least 2\nUsage: cardbox sample [flags]\n"},
		{args: []string{"sample", "extra"}, want: "cardbox sample: unexpected argument \"extra\"\nUsage: cardbox sample [flags]\n"},
		{args: []string{"tenant", "create"}, want: "cardbox tenant create: missing NAME\nUsage: cardbox tenant create NAME [flags]\n"},
		{args: []string{"sql"}, want: "cardbox sql: missing --tenant\nUsage: cardbox sql [flags] [-- PSQL_ARG...]\n"},
		{args: []string{"analytics", "nope"}, want: "cardbox analytics: unknown command \"nope\" (commands: backfill)\nUsage: cardbox analytics COMMAND\n"},
		{args: []string{"config", "--json"}, want: "cardbox config: unknown flag --json\nUsage: cardbox config\n"},
	} {
		stdout, stderr, code := runCLI(t, tt.args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != 2 || stdout != "" || len(lines) != 2 || !strings.HasPrefix(stderr, tt.want) || !strings.HasPrefix(lines[1], "Usage: cardbox") {
			t.Errorf("cardbox %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, stdout, stderr, tt.want)
		}
	}
}

// `cardbox config` prints the README's configuration table, byte for
// byte.
func TestConfigPrintsTheREADMETable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "config")
	if code != 0 || stderr != "" || stdout != config.Markdown() {
		t.Fatalf("cardbox config: exit %d, stderr %q, stdout\n%s", code, stderr, stdout)
	}
	if !strings.Contains(string(readme), "\n\n"+stdout+"\n") {
		t.Errorf("README.md does not hold the table cardbox config prints, as a paragraph of its own (go test ./cmd/internal/config -update)")
	}
}
