package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

// got is what the toy command was run with.
type got struct {
	args, passed []string
	count        int
	key, addr    string
}

// toy is a program with a group and a command of every kind of input.
func toy(g *got) *Command {
	run := &Command{
		Name: "run", Args: "NAME [MORE]", Pass: "ARG", Purpose: "Run a thing.",
		Settings: []string{"binary-addr"},
		Env:      map[string]string{"key": "TOY_KEY"},
		Rules:    map[string]config.Rule{"count": config.Positive},
		Setup: func(fs *flag.FlagSet) Action {
			count := fs.Int("count", 1, "how many")
			key := fs.String("key", "", "a key")
			return func(_ context.Context, inv *Invocation) error {
				*g = got{args: inv.Args, passed: inv.Passed, count: *count, key: *key, addr: inv.Config.BinaryAddr}
				if *count == 13 {
					return inv.Usagef("--count 13: unlucky")
				}
				if *count == 14 {
					return errors.New("failed")
				}
				return nil
			}
		},
	}
	return &Command{Name: "toy", Purpose: "A toy.", Subs: []*Command{{Name: "grp", Purpose: "A group.", Subs: []*Command{run}}}}
}

func TestRun(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		env    map[string]string
		code   int
		want   got
		stderr string
	}{
		{args: []string{"grp", "run", "a"}, want: got{args: []string{"a"}, count: 1, addr: "127.0.0.1:9009"}},
		{args: []string{"grp", "run", "a", "--count", "3", "b"}, want: got{args: []string{"a", "b"}, count: 3, addr: "127.0.0.1:9009"}},
		{args: []string{"grp", "run", "--count=2", "a", "--", "-c", "x y"}, want: got{args: []string{"a"}, passed: []string{"-c", "x y"}, count: 2, addr: "127.0.0.1:9009"}},
		{args: []string{"grp", "run", "a"}, env: map[string]string{"TOY_KEY": "k1", "CARDBOX_BINARY_ADDR": "127.0.0.1:1"},
			want: got{args: []string{"a"}, count: 1, key: "k1", addr: "127.0.0.1:1"}},
		{args: []string{"grp", "run", "a", "--key", "k2", "--binary-addr", "127.0.0.1:2"}, env: map[string]string{"TOY_KEY": "k1", "CARDBOX_BINARY_ADDR": "127.0.0.1:1"},
			want: got{args: []string{"a"}, count: 1, key: "k2", addr: "127.0.0.1:2"}},
		{args: []string{"grp", "run"}, code: 2, stderr: "toy grp run: missing NAME\nUsage: toy grp run NAME [MORE] [flags] [-- ARG...]\n"},
		{args: []string{"grp", "run", "a", "b", "c"}, code: 2, stderr: "toy grp run: unexpected argument \"c\"\n"},
		{args: []string{"grp", "run", "a", "--count", "0"}, code: 2, stderr: "toy grp run: --count 0: must be above 0\n"},
		{args: []string{"grp", "run", "a", "--count", "13"}, code: 2, stderr: "toy grp run: --count 13: unlucky\n"},
		{args: []string{"grp", "run", "a", "--count", "14"}, code: 1, stderr: "toy: failed\n"},
		{args: []string{"grp", "run", "a", "-count", "x"}, code: 2, stderr: "toy grp run: invalid value \"x\" for --count: parse error\n"},
		{args: []string{"grp", "walk"}, code: 2, stderr: "toy grp: unknown command \"walk\" (commands: run)\nUsage: toy grp COMMAND\n"},
		{args: []string{"grp"}, code: 2, stderr: "toy grp: want a command: run\nUsage: toy grp COMMAND\n"},
	} {
		for k, v := range tt.env {
			t.Setenv(k, v)
		}
		var g got
		var stdout, stderr bytes.Buffer
		code := Execute(context.Background(), toy(&g), tt.args, &stdout, &stderr)
		if code != tt.code || !strings.HasPrefix(stderr.String(), tt.stderr) || stdout.Len() > 0 {
			t.Errorf("%q: exit %d, stderr %q; want %d, %q", tt.args, code, stderr.String(), tt.code, tt.stderr)
		}
		if tt.code == 0 && !equal(g, tt.want) {
			t.Errorf("%q: ran with %+v, want %+v", tt.args, g, tt.want)
		}
		for k := range tt.env {
			os.Unsetenv(k)
		}
	}
}

func equal(a, b got) bool {
	return slices.Equal(a.args, b.args) && slices.Equal(a.passed, b.passed) && a.count == b.count && a.key == b.key && a.addr == b.addr
}

// A variable's value that breaks a rule is refused naming the variable
// and the flag.
func TestOwnVariableNamedInErrors(t *testing.T) {
	var g got
	cmd := toy(&g).Subs[0].Subs[0]
	cmd.Env["count"] = "TOY_COUNT"
	t.Setenv("TOY_COUNT", "-1")
	root := &Command{Name: "toy", Purpose: "A toy.", Subs: []*Command{cmd}}
	var stderr bytes.Buffer
	code := Execute(context.Background(), root, []string{"run", "a"}, io.Discard, &stderr)
	if code != 2 || !strings.HasPrefix(stderr.String(), "toy run: TOY_COUNT=-1 (--count): must be above 0\n") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestHelp(t *testing.T) {
	var g got
	var stdout bytes.Buffer
	if code := Execute(context.Background(), toy(&g), []string{"grp", "run", "--help"}, &stdout, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	want := `Usage: toy grp run NAME [MORE] [flags] [-- ARG...]

Run a thing.

Flags:
  --count int
        how many (default 1)
  --key string
        a key (env TOY_KEY)
  --binary-addr string
        CXDB binary protocol listen address (default 127.0.0.1:9009; env CARDBOX_BINARY_ADDR)
`
	if stdout.String() != want {
		t.Errorf("help:\n%s\nwant:\n%s", stdout.String(), want)
	}
}

// Off a terminal, progress writes nothing.
func TestProgressIsQuietOffATerminal(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf)
	p.Show("working %d", 1)
	stop := p.Every(time.Millisecond, func() string { return "tick" })
	stop()
	p.Done("done")
	if buf.Len() > 0 || p.On() || p.Writer() != io.Discard {
		t.Errorf("progress off a terminal wrote %q", buf.String())
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if NewProgress(f).On() {
		t.Error("a file is taken for a terminal")
	}
}
