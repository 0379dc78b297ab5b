// Package cli runs the commands of cardbox and cardboxd in one style:
// every command answers --help and -h on stdout with its usage line
// (positional arguments included), its purpose and its own flags; a
// command called wrongly prints one line saying what is wrong and its
// usage line on stderr and exits 2; a command reads the settings of the
// configuration table (cmd/internal/config) it names, from flags or their
// environment variables, checked against the table's rules.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

// Command is a command, or a group of subcommands.
type Command struct {
	// Name is the word that calls it ("create"); the root's is the
	// program's name.
	Name string
	// Args names its positional arguments in the usage line ("NAME");
	// one in brackets ("[NAME]") is optional. They are counted and checked
	// before Run.
	Args string
	// Pass, if set, names the arguments after "--", which the command
	// hands on untouched ("PSQL_ARG").
	Pass string
	// Purpose is one line saying what it does.
	Purpose string
	// Settings are the flag names of the configuration table's settings
	// it reads.
	Settings []string
	// Setup defines its own flags on fs and returns what runs it, with
	// the flags' values in reach.
	Setup func(fs *flag.FlagSet) Action
	// Env names the environment variables of its own flags, by flag
	// name; a flag on the command line wins.
	Env map[string]string
	// Rules are the values its own flags accept, by flag name.
	Rules map[string]config.Rule
	// Subs are a group's commands; a group has no Setup.
	Subs []*Command
}

// Action runs a command once its flags and arguments are parsed.
type Action func(ctx context.Context, inv *Invocation) error

// Invocation is what a command was called with.
type Invocation struct {
	// Path is the command as called, without arguments: "cardbox tenant create".
	Path string
	// Config holds the settings the command reads (the others are zero).
	Config *config.Config
	// Args are its positional arguments; Passed are the arguments after
	// "--" of a command with Pass set.
	Args, Passed []string
	// Given are the arguments as given after the command's name, for a
	// command that parses them again itself.
	Given          []string
	Stdout, Stderr io.Writer
	usage          string // the command's usage line
}

// Usagef reports that the command was called wrongly (exit 2): a value
// its flags accept one by one but not together, say.
func (inv *Invocation) Usagef(format string, args ...any) error {
	return &UsageError{Path: inv.Path, Msg: fmt.Sprintf(format, args...), Usage: inv.usage}
}

// UsageError is a command called wrongly: a bad flag, value, argument or
// subcommand. It exits 2.
type UsageError struct {
	Path  string // the command called
	Msg   string // what is wrong, on one line
	Usage string // the command's usage line
}

func (e *UsageError) Error() string { return e.Path + ": " + e.Msg }

// Main runs root with the process's arguments and exits with its status.
func Main(ctx context.Context, root *Command) {
	os.Exit(Execute(ctx, root, os.Args[1:], os.Stdout, os.Stderr))
}

// Execute runs root with args (without the program's name) and returns
// the exit status: 0 (done, or help shown), 1 (the command failed, its
// error on stderr) or 2 (called wrongly: one line and the usage line on
// stderr).
func Execute(ctx context.Context, root *Command, args []string, stdout, stderr io.Writer) int {
	err := Run(ctx, root, args, stdout, stderr)
	var usage *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "%s\n%s\n", usage.Error(), usage.Usage)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", root.Name, err)
	return 1
}

// Run is Execute returning the error: a *UsageError when called wrongly.
func Run(ctx context.Context, root *Command, args []string, stdout, stderr io.Writer) error {
	cmd, path, args, err := find(root, args)
	if err != nil || cmd == nil {
		return err
	}
	if cmd.Subs != nil {
		writeGroupHelp(stdout, cmd, path)
		return nil
	}
	inv, action, err := parse(cmd, path, args)
	if err != nil || action == nil {
		if errors.Is(err, flag.ErrHelp) {
			writeHelp(stdout, cmd, path)
			return nil
		}
		return err
	}
	inv.Stdout, inv.Stderr = stdout, stderr
	return action(ctx, inv)
}

// find walks the groups down to the command args name. It returns the
// group itself when its help is asked for.
func find(cmd *Command, args []string) (*Command, string, []string, error) {
	path := cmd.Name
	for cmd.Subs != nil {
		if len(args) == 0 {
			return nil, path, nil, usageErr(cmd, path, "want a command: "+names(cmd.Subs))
		}
		word := args[0]
		if isHelp(word) || word == "help" {
			return cmd, path, nil, nil
		}
		sub := lookup(cmd.Subs, word)
		if sub == nil {
			what := "unknown command"
			if strings.HasPrefix(word, "-") {
				what = "unknown flag"
			}
			return nil, path, nil, usageErr(cmd, path, fmt.Sprintf("%s %q (commands: %s)", what, word, names(cmd.Subs)))
		}
		cmd, path, args = sub, path+" "+sub.Name, args[1:]
	}
	return cmd, path, args, nil
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help"
}

func lookup(cmds []*Command, name string) *Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func names(cmds []*Command) string {
	var s []string
	for _, c := range cmds {
		s = append(s, c.Name)
	}
	return strings.Join(s, ", ")
}

// Walk calls fn with every command under root (root included) and the
// path that calls it, groups before their commands.
func Walk(root *Command, fn func(path string, cmd *Command)) {
	var walk func(path string, c *Command)
	walk = func(path string, c *Command) {
		fn(path, c)
		for _, sub := range c.Subs {
			walk(path+" "+sub.Name, sub)
		}
	}
	walk(root.Name, root)
}
