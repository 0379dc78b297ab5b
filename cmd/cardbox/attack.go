package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/hostile"
)

// attackCommand is `cardbox attack`: every hostile-client attack at once
// against a running cardboxd on this machine, then the check that it
// survived (package hostile).
func attackCommand() *cli.Command {
	return &cli.Command{
		Name: "attack", Settings: []string{"binary-addr", "http-addr"},
		Purpose: "Run the hostile-client attacks at once against a running cardboxd on this machine and check it survived (see docs/security.md).",
		Rules: map[string]config.Rule{
			"pid": config.NonNegative, "duration": config.Positive, "idle-conns": config.Positive, "partial-frames": config.Positive,
			"pipeliners": config.Positive, "slow-bodies": config.Positive, "max-rss-growth": config.Positive, "max-head-p99": config.Positive,
		},
		Setup: func(fs *flag.FlagSet) cli.Action {
			o := hostile.Defaults
			var t hostile.Target
			fs.IntVar(&t.PID, "pid", 0, "the server's process id, to check its resident memory (0: no memory check)")
			fs.DurationVar(&o.Duration, "duration", o.Duration, "how long the attacks run")
			fs.IntVar(&o.IdleConns, "idle-conns", o.IdleConns, "idle connections per listener")
			fs.IntVar(&o.PartialFrames, "partial-frames", o.PartialFrames, "connections that send most of a 64 MiB frame and stall")
			fs.IntVar(&o.Pipeliners, "pipeliners", o.Pipeliners, "connections that pipeline GET_LAST and never read")
			fs.IntVar(&o.SlowBodies, "slow-bodies", o.SlowBodies, "HTTP bodies trickled at a byte a second")
			fs.Int64Var(&o.MaxRSSGrowth, "max-rss-growth", o.MaxRSSGrowth, "bound on the server's memory growth, bytes")
			fs.DurationVar(&o.MaxHeadP99, "max-head-p99", o.MaxHeadP99, "bound on the good client's GET_HEAD p99")
			return func(ctx context.Context, inv *cli.Invocation) error {
				t.BinaryAddr, t.HTTPAddr = inv.Config.BinaryAddr, inv.Config.HTTPAddr
				o.Logf = func(format string, args ...any) { fmt.Fprintf(inv.Stderr, format+"\n", args...) }
				r, err := hostile.Run(ctx, t, o)
				if err != nil {
					return err
				}
				return r.Print(inv.Stdout)
			}
		},
	}
}
