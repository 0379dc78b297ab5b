package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

// parse reads a command's flags, arguments and environment. It returns
// flag.ErrHelp for -h and --help, a *UsageError for anything wrong.
func parse(cmd *Command, path string, args []string) (*Invocation, Action, error) {
	fs := newFlagSet(path)
	bound := config.Bind(fs, cmd.Settings)
	var action Action
	if cmd.Setup != nil {
		action = cmd.Setup(fs)
	}
	positional, passed, err := parseArgs(fs, args, cmd.Pass != "")
	if errors.Is(err, flag.ErrHelp) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, usageErr(cmd, path, flagMessage(err))
	}
	if err := countArgs(cmd.Args, positional); err != nil {
		return nil, nil, usageErr(cmd, path, err.Error())
	}
	if err := applyEnvAndRules(fs, bound, cmd); err != nil {
		return nil, nil, usageErr(cmd, path, err.Error())
	}
	inv := &Invocation{Path: path, Config: bound.Config, Args: positional, Passed: passed, Given: args, usage: UsageLine(cmd, path)}
	return inv, action, nil
}

// applyEnvAndRules gives the flags not on the command line their
// variables' values and checks every value against its rule.
func applyEnvAndRules(fs *flag.FlagSet, bound *config.Bound, cmd *Command) error {
	// Settings first: Apply must see only the command line's flags as
	// given.
	if err := bound.Apply(); err != nil {
		return err
	}
	fromEnv, err := applyOwnEnv(fs, cmd.Env)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(cmd.Rules)) {
		if err := config.Check(fs, name, fromEnv[name], cmd.Rules[name]); err != nil {
			return err
		}
	}
	return nil
}

// newFlagSet is a flag set that prints nothing: help and errors are
// this package's to write.
func newFlagSet(path string) *flag.FlagSet {
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseArgs parses flags anywhere among the arguments ("create acme
// --name X"). With pass set, what follows "--" is returned apart.
func parseArgs(fs *flag.FlagSet, args []string, pass bool) (positional, passed []string, err error) {
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			if pass {
				return positional, rest, nil
			}
			return append(positional, rest...), nil, nil
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
}

// countArgs checks the positional arguments against the usage's names:
// each plain name is required, each bracketed one optional.
func countArgs(spec string, args []string) error {
	names := strings.Fields(spec)
	required := 0
	for _, n := range names {
		if !strings.HasPrefix(n, "[") {
			required++
		}
	}
	switch {
	case len(args) < required:
		return fmt.Errorf("missing %s", strings.Join(names[len(args):required], " "))
	case len(args) > len(names):
		return fmt.Errorf("unexpected argument %q", args[len(names)])
	}
	return nil
}

// applyOwnEnv sets each of a command's own flags not given on the command
// line from its environment variable; it returns the variables used, by
// flag name.
func applyOwnEnv(fs *flag.FlagSet, env map[string]string) (map[string]string, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	used := map[string]string{}
	for name, variable := range env {
		v, ok := os.LookupEnv(variable)
		if !ok || given[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return nil, fmt.Errorf("%s=%q (--%s): %w", variable, v, name, err)
		}
		used[name] = variable
	}
	return used, nil
}

// flagMessage rewrites the flag package's errors in the double-dash
// spelling this package uses.
func flagMessage(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return "unknown flag --" + strings.TrimLeft(name, "-")
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return "--" + strings.TrimLeft(name, "-") + " needs a value"
	}
	return flagName.ReplaceAllString(msg, "for --")
}

// flagName is how the flag package names a flag in its errors.
var flagName = regexp.MustCompile(`for (flag )?-+`)

func usageErr(cmd *Command, path, msg string) *UsageError {
	return &UsageError{Path: path, Msg: msg, Usage: UsageLine(cmd, path)}
}
