package config

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the README's configuration table from the settings")

const readmePath = "../../../README.md"

// readmeTable returns the README, and the start and end of its
// configuration table (from its header row to the line after its last).
func readmeTable(t *testing.T) (readme []byte, start, end int) {
	t.Helper()
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	start = bytes.Index(readme, []byte("| flag | environment | default | meaning |\n"))
	if start < 0 {
		t.Fatal("README.md has no configuration table (| flag | environment | default | meaning |)")
	}
	end = start
	for end < len(readme) && readme[end] == '|' {
		end += bytes.IndexByte(readme[end:], '\n') + 1
	}
	return readme, start, end
}

// The README's configuration table is the settings' table, byte for
// byte (go test ./cmd/internal/config -update rewrites it).
func TestREADMETableIsTheSettingsTable(t *testing.T) {
	readme, start, end := readmeTable(t)
	want := Markdown()
	if *update {
		out := append(append(append([]byte{}, readme[:start]...), want...), readme[end:]...)
		if err := os.WriteFile(readmePath, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got := string(readme[start:end])
	if got == want {
		return
	}
	gotLines, wantLines := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(gotLines), len(wantLines)) {
		var g, w string
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Errorf("README.md's configuration table, row %d:\n got: %s\nwant: %s", i+1, g, w)
		}
	}
	t.Log("go test ./cmd/internal/config -update rewrites the README's table")
}

// parse binds names on a flag set, parses args and applies the
// environment, as cmd/internal/cli does.
func parse(t *testing.T, names []string, args ...string) (*Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	b := Bind(fs, names)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return b.Config, b.Apply()
}

func TestFlagsWinOverEnvironmentOverDefaults(t *testing.T) {
	t.Setenv("CARDBOX_HTTP_ADDR", "127.0.0.1:1111")
	t.Setenv("CARDBOX_SHUTDOWN_TIMEOUT", "5s")
	c, err := parse(t, Names(), "--http-addr", "127.0.0.1:2222")
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:2222" || c.ShutdownTimeout != 5*time.Second || c.BinaryAddr != "127.0.0.1:9009" || c.DataDir != "./data" {
		t.Fatalf("config = %+v", c)
	}
}

// A command reads only the settings it binds: another setting's bad
// variable does not concern it.
func TestOnlyBoundSettingsAreRead(t *testing.T) {
	t.Setenv("CARDBOX_MAX_CONNS", "-5")
	t.Setenv("CARDBOX_BINARY_ADDR", "127.0.0.1:7777")
	c, err := parse(t, []string{"binary-addr"})
	if err != nil || c.BinaryAddr != "127.0.0.1:7777" || c.MaxConns != 0 {
		t.Fatalf("config %+v, %v", c, err)
	}
}

// Values that make no sense are refused, naming the flag (and the
// variable when the value came from it).
func TestRulesRefuseValuesThatMakeNoSense(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  [2]string
		want string // in the error; "" for none
	}{
		{args: []string{"--max-conns", "-5"}, want: "--max-conns -5: must be above 0"},
		{args: []string{"--max-conns", "0"}, want: "--max-conns 0: must be above 0"},
		{env: [2]string{"CARDBOX_MAX_CONNS", "-5"}, want: "CARDBOX_MAX_CONNS=-5 (--max-conns): must be above 0"},
		{env: [2]string{"CARDBOX_MAX_CONNS", "x"}, want: `CARDBOX_MAX_CONNS="x" (--max-conns)`},
		{args: []string{"--shutdown-timeout", "-1s"}, want: "--shutdown-timeout -1s: must be above 0"},
		{args: []string{"--sweep-interval", "0s"}, want: "--sweep-interval 0s: must be above 0"},
		{args: []string{"--blob-claim-grace", "0s"}, want: "--blob-claim-grace 0s: must be above 0"},
		{args: []string{"--blob-claim-grace", "-1h"}, want: "--blob-claim-grace -1h0m0s: must be above 0"},
		{args: []string{"--http-body-limit", "-1"}, want: "--http-body-limit -1: must be above 0"},
		{args: []string{"--tenant-rate", "-1"}, want: "--tenant-rate -1: must not be negative"},
		{args: []string{"--tenant-rate", "0"}},
		{args: []string{"--tenant-quota-bytes", "-1"}, want: "--tenant-quota-bytes -1: must not be negative"},
		{args: []string{"--tenant-memory-share", "0"}, want: "--tenant-memory-share 0: must be above 0 and at most 1"},
		{args: []string{"--tenant-memory-share", "1.5"}, want: "--tenant-memory-share 1.5: must be above 0 and at most 1"},
		{args: []string{"--tenant-memory-share", "1"}},
		{args: []string{"--tenant-burst", "0"}, want: "--tenant-burst 0: must be above 0"},
		{args: []string{"--compaction-threshold", "0"}, want: "--compaction-threshold 0: must be above 0 and at most 1"},
		{args: []string{"--compaction-threshold", "-0.5"}, want: "--compaction-threshold -0.5: must be above 0 and at most 1"},
		{args: []string{"--compaction-threshold", "1.01"}, want: "--compaction-threshold 1.01: must be above 0 and at most 1"},
		{args: []string{"--compaction-threshold", "1"}},
		{args: []string{"--erase-within", "0s"}, want: "--erase-within 0s: must be above 0"},
		{args: []string{"--erase-within", "-1h"}, want: "--erase-within -1h0m0s: must be above 0"},
		{env: [2]string{"CARDBOX_ERASE_WITHIN", "0s"}, want: "CARDBOX_ERASE_WITHIN=0s (--erase-within): must be above 0"},
		{args: []string{"--erase-within", "1h"}},
		{args: []string{"--compaction-rate", "0"}, want: "--compaction-rate 0: must be above 0"},
		{args: []string{"--compaction-rate", "-1"}, want: "--compaction-rate -1: must be above 0"},
		{args: []string{"--compaction-rate", "1"}},
		{args: []string{"--mode", "public"}, want: "--mode public: want dev or hosted"},
		{args: []string{"--log-format", "xml"}, want: "--log-format xml: want text or json"},
		{args: []string{"--card-cache-bytes", "-1"}},
		{args: []string{"--retention-idle", "0"}, want: "retention-idle: must be at least 1s"},
		{args: []string{"--retention-idle", "-1h"}, want: "retention-idle: must be at least 1s"},
		{args: []string{"--retention-max-age", "soon"}, want: "retention-max-age: want a duration such as 36h or 30d"},
		{env: [2]string{"CARDBOX_RETENTION_MAX_AGE", "0d"}, want: `CARDBOX_RETENTION_MAX_AGE="0d" (--retention-max-age): must be at least 1s`},
		{args: []string{"--retention-idle", "30d", "--retention-max-age", "36h"}},
		{},
	} {
		if tt.env[0] != "" {
			t.Setenv(tt.env[0], tt.env[1])
		}
		_, err := parse(t, Names(), tt.args...)
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%v %v: %v, want %q", tt.args, tt.env, err, tt.want)
		}
		if tt.env[0] != "" {
			os.Unsetenv(tt.env[0])
		}
	}
}

// Every numeric or duration setting has a rule, unless every value of it
// means something (the caches: negative disables them) or its value
// checks itself as it parses (the retention defaults, whose zero is off
// and cannot be given).
func TestEveryNumberHasARule(t *testing.T) {
	anyValue := map[string]bool{"card-cache-bytes": true, "render-cache-bytes": true,
		"retention-idle": true, "retention-max-age": true}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	for _, s := range settings(&Config{}) {
		s.bind(fs, s.flag, "")
		_, isNumber := number(fs.Lookup(s.flag).Value.(flag.Getter).Get())
		if isNumber && s.rule == nil && !anyValue[s.flag] {
			t.Errorf("--%s takes a number but has no rule: decide which values make sense", s.flag)
		}
	}
}

// The table and help texts have no markdown left in plain text.
func TestPlainText(t *testing.T) {
	got := PlainText("see [docs/security.md](docs/security.md#tls) and `--tls-key`")
	if got != "see docs/security.md and --tls-key" {
		t.Errorf("PlainText = %q", got)
	}
}
