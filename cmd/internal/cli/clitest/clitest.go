// Package clitest checks that commands built with package cli keep its
// style; the tests of cardbox and cardboxd run it on their dispatch
// tables, so that a new command is checked without being listed.
package clitest

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

// CheckHelp runs every command under root (root included) with --help
// and with -h, and checks the help: exit 0, on stdout alone; the usage
// line (with the positional arguments) first, the purpose on one line
// after a blank one; a group lists its commands; a command lists its
// flags, all spelt with two dashes, the configuration table's only if
// it reads them, and an environment variable only for a flag that has
// one.
func CheckHelp(t *testing.T, root *cli.Command) {
	t.Helper()
	cli.Walk(root, func(path string, cmd *cli.Command) {
		args := strings.Fields(path)[1:]
		for _, h := range []string{"--help", "-h"} {
			var stdout, stderr bytes.Buffer
			code := cli.Execute(context.Background(), root, append(slices.Clone(args), h), &stdout, &stderr)
			if code != 0 || stderr.Len() > 0 {
				t.Errorf("%s %s: exit %d, stderr %q; want 0 and nothing", path, h, code, stderr.String())
				continue
			}
			for _, problem := range helpProblems(path, cmd, stdout.String()) {
				t.Errorf("%s %s: %s\n%s", path, h, problem, stdout.String())
			}
		}
	})
}

// helpProblems lists what is wrong with a command's help text.
func helpProblems(path string, cmd *cli.Command, help string) []string {
	var problems []string
	lines := strings.Split(help, "\n")
	if len(lines) < 3 || lines[0] != cli.UsageLine(cmd, path) || !strings.HasPrefix(lines[0], "Usage: "+path) {
		return []string{"does not start with its usage line " + cli.UsageLine(cmd, path)}
	}
	if cmd.Args != "" && !strings.Contains(lines[0], " "+cmd.Args) {
		problems = append(problems, "the usage line does not name its arguments "+cmd.Args)
	}
	if lines[1] != "" || lines[2] == "" || lines[2] != cmd.Purpose || strings.Contains(cmd.Purpose, "\n") {
		problems = append(problems, "no one-line purpose after the usage line")
	}
	if cmd.Subs != nil {
		for _, sub := range cmd.Subs {
			if !strings.Contains(help, "\n  "+sub.Name+" ") {
				problems = append(problems, "does not list its command "+sub.Name)
			}
		}
		return problems
	}
	return append(problems, flagProblems(cmd, lines)...)
}

// envNote is how help names a flag's variable.
var envNote = regexp.MustCompile(`env ([A-Z][A-Z0-9_]*)\)`)

// flagProblems checks the flag lines of a command's help.
func flagProblems(cmd *cli.Command, lines []string) []string {
	var problems []string
	for _, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "-") && !strings.HasPrefix(line, "  --") {
			problems = append(problems, "a flag not spelt --name: "+line)
		}
		if strings.Contains(line, "Usage of") {
			problems = append(problems, "the flag package's own usage text: "+line)
		}
	}
	listed := map[string]bool{}
	for _, line := range lines {
		if name, ok := strings.CutPrefix(line, "  --"); ok {
			listed[strings.Fields(name)[0]] = true
		}
	}
	for _, name := range config.Names() {
		if listed[name] != slices.Contains(cmd.Settings, name) {
			problems = append(problems, "lists --"+name+" exactly when it reads it: not so")
		}
	}
	want := map[string]bool{}
	for _, name := range cmd.Settings {
		s, _ := config.Lookup(name)
		want[s.Env] = true
	}
	for _, env := range cmd.Env {
		want[env] = true
	}
	for _, line := range lines {
		for _, m := range envNote.FindAllStringSubmatch(line, -1) {
			if !want[m[1]] {
				problems = append(problems, "names a variable the command does not read: "+m[1])
			}
			delete(want, m[1])
		}
	}
	for env := range want {
		problems = append(problems, "does not name its variable "+env)
	}
	return problems
}
