package config

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"
)

// The README's configuration table names every setting with its variable.
func TestREADMEListsEverySetting(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings(&Config{}) {
		row := "| `--" + s.flag + "` | `" + s.env + "` |"
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md has no row for %s", row)
		}
	}
}

func TestFlagsWinOverEnvironmentOverDefaults(t *testing.T) {
	t.Setenv("CARDBOX_HTTP_ADDR", "127.0.0.1:1111")
	t.Setenv("CARDBOX_SHUTDOWN_TIMEOUT", "5s")
	c, err := Parse("cardboxd", []string{"--http-addr", "127.0.0.1:2222"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:2222" || c.ShutdownTimeout != 5*time.Second || c.BinaryAddr != "127.0.0.1:9009" || c.DataDir != "./data" {
		t.Fatalf("config = %+v", c)
	}
}

func TestBadValuesAndHelp(t *testing.T) {
	t.Setenv("CARDBOX_SHUTDOWN_TIMEOUT", "soon")
	if _, err := Parse("cardboxd", nil, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "CARDBOX_SHUTDOWN_TIMEOUT") {
		t.Fatalf("bad env value: %v", err)
	}
	os.Unsetenv("CARDBOX_SHUTDOWN_TIMEOUT")
	var out bytes.Buffer
	if _, err := Parse("cardboxd", []string{"--help"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, s := range settings(&Config{}) {
		if !strings.Contains(out.String(), s.env) {
			t.Errorf("--help does not list %s", s.env)
		}
	}
}
