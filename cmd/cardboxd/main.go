// Command cardboxd is the cardbox server: the CXDB binary protocol (turns),
// the HTTP API (health, CardBox REST) and, unless CARDBOX_DATABASE_URL is
// set, an embedded Postgres in the data directory. It shuts down on SIGINT
// or SIGTERM after in-flight requests finish. `cardboxd --help` lists its
// settings, which the README's configuration table lists too.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cli.Main(ctx, command())
}

// command is cardboxd: every setting of the configuration table.
func command() *cli.Command {
	return &cli.Command{
		Name:     "cardboxd",
		Purpose:  "Serve cardbox: the CXDB binary protocol, the HTTP API and, without --database-url, an embedded Postgres in the data directory.",
		Settings: config.Names(),
		Setup: func(*flag.FlagSet) cli.Action {
			return func(ctx context.Context, inv *cli.Invocation) error { return serve(ctx, inv.Config) }
		},
	}
}

// serve runs the server until ctx ends.
func serve(ctx context.Context, cfg *config.Config) error {
	log, err := newLogger(cfg)
	if err != nil {
		return err
	}
	if err := run(ctx, cfg, log); err != nil {
		log.Error("cardboxd stopped", "err", err)
		return err
	}
	log.Info("cardboxd stopped")
	return nil
}

func newLogger(cfg *config.Config) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", cfg.LogLevel, err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(cfg.LogFormat) {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	default:
		return nil, fmt.Errorf("log format %q: want text or json", cfg.LogFormat)
	}
}
