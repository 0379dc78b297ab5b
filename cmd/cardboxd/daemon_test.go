package main

import (
	"flag"
	"log/slog"
	"reflect"
	"testing"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/internal/daemon"
)

// The daemon's defaults, which test servers start with, are cardboxd's,
// and every setting with a default reaches the daemon.
func TestDaemonDefaultsAreCardboxds(t *testing.T) {
	fs := flag.NewFlagSet("cardboxd", flag.ContinueOnError)
	b := config.Bind(fs, config.Names())
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	got := daemonConfig(b.Config, slog.New(slog.DiscardHandler))
	if got.OpenDatabase == nil || got.Logger == nil {
		t.Fatal("the daemon gets no database or no logger")
	}
	got.OpenDatabase, got.Logger = nil, nil
	if want := daemon.Defaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("cardboxd's defaults as the daemon gets them:\n%+v\ndaemon.Defaults:\n%+v", got, want)
	}
	if config.ModeDev != daemon.ModeDev || config.ModeHosted != daemon.ModeHosted {
		t.Error("the modes are spelled differently")
	}
}
