// Command cardboxd is the cardbox server: the CXDB binary protocol (turns),
// the HTTP API (health, CardBox REST) and, unless CARDBOX_DATABASE_URL is
// set, an embedded Postgres in the data directory. It shuts down on SIGINT
// or SIGTERM after in-flight requests finish.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

func main() {
	cfg, err := config.Parse("cardboxd", os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cardboxd:", err)
		os.Exit(2)
	}
	log, err := newLogger(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cardboxd:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("cardboxd stopped", "err", err)
		fmt.Fprintln(os.Stderr, "cardboxd:", err)
		os.Exit(1)
	}
	log.Info("cardboxd stopped")
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
