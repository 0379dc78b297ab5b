package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

// UsageLine is the command's usage line: "Usage: cardbox tenant create
// NAME [flags]".
func UsageLine(cmd *Command, path string) string {
	parts := []string{"Usage:", path}
	switch {
	case cmd.Subs != nil:
		parts = append(parts, "COMMAND")
	default:
		if cmd.Args != "" {
			parts = append(parts, cmd.Args)
		}
		if hasFlags(cmd, path) {
			parts = append(parts, "[flags]")
		}
		if cmd.Pass != "" {
			parts = append(parts, "[-- "+cmd.Pass+"...]")
		}
	}
	return strings.Join(parts, " ")
}

func hasFlags(cmd *Command, path string) bool {
	n := 0
	flags(cmd, path).VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// flags is the command's flag set, as parse makes it.
func flags(cmd *Command, path string) *flag.FlagSet {
	fs := newFlagSet(path)
	config.Bind(fs, cmd.Settings)
	if cmd.Setup != nil {
		cmd.Setup(fs)
	}
	return fs
}

// writeGroupHelp writes a group's help: its usage line, purpose and
// commands.
func writeGroupHelp(w io.Writer, cmd *Command, path string) {
	fmt.Fprintf(w, "%s\n\n%s\n\nCommands:\n", UsageLine(cmd, path), cmd.Purpose)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, sub := range cmd.Subs {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(sub.Name+" "+sub.Args), sub.Purpose)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun \"%s COMMAND --help\" for a command's arguments and flags.\n", path)
}

// writeHelp writes a command's help: its usage line, purpose and flags,
// its own first (sorted), then the settings it reads in the table's
// order, each with its type, default and environment variable.
func writeHelp(w io.Writer, cmd *Command, path string) {
	fmt.Fprintf(w, "%s\n\n%s\n", UsageLine(cmd, path), cmd.Purpose)
	fs := flags(cmd, path)
	var own []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(cmd.Settings, f.Name) {
			own = append(own, f)
		}
	})
	if len(own)+len(cmd.Settings) == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	for _, f := range own {
		writeFlag(w, f, f.Usage, defaultOf(f), cmd.Env[f.Name])
	}
	for _, name := range cmd.Settings {
		s, _ := config.Lookup(name)
		writeFlag(w, fs.Lookup(name), s.Usage, s.Default, s.Env)
	}
}

// writeFlag writes one flag: "--name type" on its line, then its usage
// with its default and variable.
func writeFlag(w io.Writer, f *flag.Flag, usage, def, env string) {
	head := "  --" + f.Name
	if t := typeName(f); t != "" {
		head += " " + t
	}
	var notes []string
	if def != "" {
		notes = append(notes, "default "+def)
	}
	if env != "" {
		notes = append(notes, "env "+env)
	}
	if len(notes) > 0 {
		usage += " (" + strings.Join(notes, "; ") + ")"
	}
	fmt.Fprintf(w, "%s\n        %s\n", head, usage)
}

// typeName is the kind of value a flag takes, "" for a switch.
func typeName(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return "value"
	}
	switch g.Get().(type) {
	case bool:
		return ""
	case string:
		return "string"
	case int, int64:
		return "int"
	case uint, uint64:
		return "uint"
	case float64:
		return "float"
	case time.Duration:
		return "duration"
	}
	return "value"
}

// defaultOf is an own flag's default as help shows it: none for an
// empty string or a switch that is off.
func defaultOf(f *flag.Flag) string {
	if f.DefValue == "" || (typeName(f) == "" && f.DefValue == "false") {
		return ""
	}
	return f.DefValue
}
