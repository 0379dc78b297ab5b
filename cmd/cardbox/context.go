package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

// contextCommand is `cardbox context`: the contexts of a running server,
// through its HTTP API (a deletion must go through the server that holds
// the context in memory, never around it in Postgres).
func contextCommand() *cli.Command {
	return &cli.Command{
		Name:    "context",
		Purpose: "Act on the contexts of a running server.",
		Subs:    []*cli.Command{contextDelete()},
	}
}

func contextDelete() *cli.Command {
	return &cli.Command{
		Name: "delete", Args: "ID", Settings: []string{"http-addr", "tls-cert"},
		Purpose: "Delete a context (DELETE /v1/contexts/{id}); its turns that no live context reaches die with it.",
		Env:     map[string]string{"key": "CARDBOX_KEY"},
		Rules:   map[string]config.Rule{"timeout": config.Positive},
		Setup: func(fs *flag.FlagSet) cli.Action {
			key := fs.String("key", "", "API key (writer or admin) of the context's tenant, on a hosted server")
			timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the answer")
			return func(ctx context.Context, inv *cli.Invocation) error {
				id, err := strconv.ParseUint(inv.Args[0], 10, 64)
				if err != nil || id == 0 {
					return inv.Usagef("context id %q: want a positive integer", inv.Args[0])
				}
				if err := deleteContext(ctx, inv.Config, *key, id, *timeout); err != nil {
					return err
				}
				fmt.Fprintf(inv.Stdout, "deleted context %d\n", id)
				return nil
			}
		},
	}
}

// deleteContext asks the server at cfg.HTTPAddr to delete context id.
func deleteContext(ctx context.Context, cfg *config.Config, key string, id uint64, timeout time.Duration) error {
	base, client, err := serverClient(cfg, timeout)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, fmt.Sprintf("%s/v1/contexts/%d", base, id), nil)
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("delete context %d: %w", id, err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNoContent {
		return nil
	}
	return fmt.Errorf("delete context %d: %w", id, answerError(res))
}

// answerError reads a failed answer's error body
// ({"error":{"code","message","kind"}}) into one line.
func answerError(res *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	var e struct {
		Error struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return fmt.Errorf("the server answered %s (%s): %s", res.Status, e.Error.Kind, e.Error.Message)
	}
	return fmt.Errorf("the server answered %s: %s", res.Status, strings.TrimSpace(string(body)))
}
