package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/cardboxhq/cardbox/api/adminhttp"
	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

// compactCommand is `cardbox compact`: POST /admin/compactions on a
// running server, which compacts its files now, every pending erasure
// included, and with --wait GET /admin/compactions/{id} until it ends.
func compactCommand() *cli.Command {
	return &cli.Command{
		Name: "compact", Settings: []string{"http-addr", "tls-cert"},
		Purpose: "Ask the server for a compaction now (POST /admin/compactions): every segment holding deleted bytes is rewritten without them, " +
			"the active one closed early; with --wait, show its progress and exit 0 once it is done, 1 if it failed.",
		Env:   map[string]string{"key": "CARDBOX_KEY"},
		Rules: map[string]config.Rule{"timeout": config.Positive, "poll": config.Positive},
		Setup: func(fs *flag.FlagSet) cli.Action {
			key := fs.String("key", "", "operator key, on a hosted server")
			wait := fs.Bool("wait", false, "wait for the compaction to end, printing its progress")
			timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for each answer of the server")
			poll := fs.Duration("poll", time.Second, "with --wait, how often to ask how the compaction goes")
			return func(ctx context.Context, inv *cli.Invocation) error {
				c, err := newCompactClient(inv.Config, *key, *timeout)
				if err != nil {
					return err
				}
				defer c.client.CloseIdleConnections()
				return c.compact(ctx, inv.Stdout, *wait, *poll)
			}
		},
	}
}

// compactClient asks one server about compactions.
type compactClient struct {
	base, key string
	client    *http.Client
}

func newCompactClient(cfg *config.Config, key string, timeout time.Duration) (*compactClient, error) {
	base, client, err := serverClient(cfg, timeout)
	if err != nil {
		return nil, err
	}
	return &compactClient{base: base, key: key, client: client}, nil
}

// compact asks for a compaction and, with wait, follows it to its end.
// A compaction the server started by itself, running when asked, may
// not include every pending erasure: once it ends, wait asks again.
func (c *compactClient) compact(ctx context.Context, out io.Writer, wait bool, poll time.Duration) error {
	for {
		run, err := c.do(ctx, http.MethodPost, "/admin/compactions")
		if err != nil {
			return err
		}
		if !wait {
			fmt.Fprintf(out, "compaction %s %s (%s, started %s)\n", run.ID, run.State, run.Trigger, run.StartedAt.Format(time.RFC3339))
			if run.Trigger == adminhttp.CompactionAutomatic {
				fmt.Fprintln(out, "an automatic compaction was running: ask again once it is done to include every pending erasure")
			}
			return nil
		}
		if run.Trigger == adminhttp.CompactionAutomatic {
			fmt.Fprintf(out, "compaction %s, started by the server, is running: waiting for it, then asking again\n", run.ID)
		} else {
			fmt.Fprintf(out, "compaction %s running\n", run.ID)
		}
		end, err := c.follow(ctx, out, run, poll)
		if err != nil {
			return err
		}
		if end.State != adminhttp.CompactionDone {
			return fmt.Errorf("compaction %s %s: %s", end.ID, end.State, end.Error)
		}
		fmt.Fprintf(out, "compaction %s done: %d segments, %d bytes reclaimed\n", end.ID, end.SegmentsDone, end.BytesReclaimed)
		if end.Trigger != adminhttp.CompactionAutomatic {
			return nil
		}
	}
}

// follow polls the compaction until it ends, printing a line whenever its
// progress changes, once it has listed segments.
func (c *compactClient) follow(ctx context.Context, out io.Writer, run adminhttp.Compaction, poll time.Duration) (adminhttp.Compaction, error) {
	last := ""
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if run.State != adminhttp.CompactionRunning {
			return run, nil
		}
		if line := fmt.Sprintf("compaction %s: %d of %d segments, %d bytes reclaimed", run.ID, run.SegmentsDone, run.SegmentsTotal,
			run.BytesReclaimed); line != last && run.SegmentsTotal > 0 {
			fmt.Fprintln(out, line)
			last = line
		}
		select {
		case <-ctx.Done():
			return run, fmt.Errorf("stopped waiting for compaction %s (it goes on in the server): %w", run.ID, ctx.Err())
		case <-tick.C:
		}
		next, err := c.do(ctx, http.MethodGet, "/admin/compactions/"+run.ID)
		if err != nil {
			return run, err
		}
		run = next
	}
}

// do sends a request of the compaction routes and decodes the answer.
func (c *compactClient) do(ctx context.Context, method, path string) (adminhttp.Compaction, error) {
	var run adminhttp.Compaction
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return run, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	res, err := c.client.Do(req)
	if err != nil {
		return run, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusAccepted {
		return run, fmt.Errorf("%s %s: %w", method, path, answerError(res))
	}
	if err := json.NewDecoder(res.Body).Decode(&run); err != nil {
		return run, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	return run, nil
}
