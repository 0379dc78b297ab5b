package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/cardboxhq/cardbox/internal/hostile"
)

// attack runs `cardbox attack`: every hostile-client attack of package
// hostile at once against a running cardboxd on this machine, then
// checks that it survived.
func attack(ctx context.Context, args []string) error {
	o := hostile.Defaults
	var t hostile.Target
	fs := flag.NewFlagSet("cardbox attack", flag.ContinueOnError)
	fs.StringVar(&t.BinaryAddr, "addr", "127.0.0.1:9009", "binary protocol address of the server")
	fs.StringVar(&t.HTTPAddr, "http", "127.0.0.1:9010", "HTTP address of the server")
	fs.IntVar(&t.PID, "pid", 0, "the server's process id, to check its resident memory (0: no memory check)")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "how long the attacks run")
	fs.IntVar(&o.IdleConns, "idle-conns", o.IdleConns, "idle connections per listener")
	fs.IntVar(&o.PartialFrames, "partial-frames", o.PartialFrames, "connections that send most of a 64 MiB frame and stall")
	fs.IntVar(&o.Pipeliners, "pipeliners", o.Pipeliners, "connections that pipeline GET_LAST and never read")
	fs.IntVar(&o.SlowBodies, "slow-bodies", o.SlowBodies, "HTTP bodies trickled at a byte a second")
	fs.Int64Var(&o.MaxRSSGrowth, "max-rss-growth", o.MaxRSSGrowth, "bound on the server's memory growth, bytes")
	fs.DurationVar(&o.MaxHeadP99, "max-head-p99", o.MaxHeadP99, "bound on the good client's GET_HEAD p99")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	r, err := hostile.Run(ctx, t, o)
	if err != nil {
		return err
	}
	fmt.Printf("server RSS: %d MiB before, %d MiB peak (+%d MiB)\n", r.BaselineRSS>>20, r.PeakRSS>>20, (r.PeakRSS-r.BaselineRSS)>>20)
	fmt.Printf("good client GET_HEAD: %d requests, p50 %v, p99 %v\n", r.Heads, r.HeadP50.Round(time.Microsecond), r.HeadP99.Round(time.Microsecond))
	if err := r.Err(); err != nil {
		return fmt.Errorf("the server did not survive the attacks:\n%w", err)
	}
	fmt.Println("survived: every answer, stored turn and card intact, within the bounds")
	return nil
}
