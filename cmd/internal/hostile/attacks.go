package hostile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
)

const dialTimeout = 2 * time.Second

// holdConns dials n connections to addr, runs use on each in its own
// goroutine (it may run until ctx ends; an error closes that connection),
// keeps them until ctx ends and closes them. Dials the server refuses are
// expected and ignored.
func holdConns(ctx context.Context, addr string, n int, use func(context.Context, net.Conn) error) {
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
		users sync.WaitGroup
	)
	const dialers = 8
	for w := range dialers {
		wg.Go(func() {
			for i := w; i < n && ctx.Err() == nil; i += dialers {
				d := net.Dialer{Timeout: dialTimeout}
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				if use != nil {
					users.Go(func() {
						if use(ctx, c) != nil {
							c.Close()
						}
					})
				}
			}
		})
	}
	<-ctx.Done()
	wg.Wait()
	users.Wait()
	for _, c := range conns {
		c.Close()
	}
}

// idleBinary opens connections to the binary port and sends nothing.
func idleBinary(ctx context.Context, t Target, o Options, _ *dataset) {
	holdConns(ctx, t.BinaryAddr, o.IdleConns, nil)
}

// idleHTTP opens keep-alive connections: one request each, then silence.
func idleHTTP(ctx context.Context, t Target, o Options, _ *dataset) {
	holdConns(ctx, t.HTTPAddr, o.IdleConns, func(_ context.Context, c net.Conn) error {
		_, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: hostile\r\n\r\n"))
		return err
	})
}

// partialFrames announce a 64 MiB APPEND_TURN, send PartialBytes of it and
// stall.
func partialFrames(ctx context.Context, t Target, o Options, _ *dataset) {
	chunk := make([]byte, 1<<20)
	holdConns(ctx, t.BinaryAddr, o.PartialFrames, func(ctx context.Context, c net.Conn) error {
		hdr := cxdbcompat.AppendFrame(nil, cxdbcompat.MsgAppendTurn, 0, 1, nil)
		hdr[0], hdr[1], hdr[2], hdr[3] = 0, 0, 0, 4 // len = 64 MiB, little-endian
		if _, err := c.Write(hdr); err != nil {
			return err
		}
		for sent := 0; sent < o.PartialBytes && ctx.Err() == nil; sent += len(chunk) {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := c.Write(chunk[:min(len(chunk), o.PartialBytes-sent)]); err != nil {
				return err
			}
		}
		return nil
	})
}

// pipeline sends Pipelined GET_LAST requests for the big turns on each
// connection and never reads an answer.
func pipeline(ctx context.Context, t Target, o Options, d *dataset) {
	var reqs []byte
	for i := range o.Pipelined {
		req := cxdbcompat.GetLastRequest{ContextID: d.contextID, Limit: replyTurns, IncludePayload: true}
		reqs = cxdbcompat.AppendFrame(reqs, cxdbcompat.MsgGetLast, 0, uint64(i+1), req.AppendTo(nil))
	}
	holdConns(ctx, t.BinaryAddr, o.Pipeliners, func(_ context.Context, c net.Conn) error {
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Write(reqs)
		return err
	})
}

// slowBodies start card writes whose 1 MiB body arrives a byte a second.
func slowBodies(ctx context.Context, t Target, o Options, _ *dataset) {
	holdConns(ctx, t.HTTPAddr, o.SlowBodies, func(ctx context.Context, c net.Conn) error {
		_, err := fmt.Fprintf(c, "POST /projects/hostile/cards HTTP/1.1\r\nHost: hostile\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", 1<<20)
		if err != nil {
			return err
		}
		return trickle(ctx, c)
	})
}

// trickle writes a byte a second until ctx ends or the server hangs up.
func trickle(ctx context.Context, c net.Conn) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if _, err := c.Write([]byte(" ")); err != nil {
				return err
			}
		}
	}
}

// headInterval paces the good client, so that it measures the server
// rather than competing with it for the CPU.
const headInterval = 5 * time.Millisecond

// goodClient runs GET_HEAD on one connection until ctx ends and returns
// each latency; a failed GET_HEAD is an error.
func goodClient(ctx context.Context, t Target, d *dataset) ([]time.Duration, error) {
	c, err := client.Dial(ctx, t.BinaryAddr, client.WithClientTag("hostile-good"))
	if err != nil {
		return nil, fmt.Errorf("good client: %w", err)
	}
	defer c.Close()
	tick := time.NewTicker(headInterval)
	defer tick.Stop()
	var out []time.Duration
	for {
		select {
		case <-ctx.Done():
			return out, nil
		case <-tick.C:
		}
		start := time.Now()
		_, err := c.GetHead(ctx, d.contextID)
		if err != nil {
			if ctx.Err() != nil {
				return out, nil
			}
			return out, fmt.Errorf("good client: GET_HEAD failed during the attacks: %w", err)
		}
		out = append(out, time.Since(start))
	}
}

// samplePeak reads the process's resident memory every 100 ms until ctx
// ends and returns the largest.
func samplePeak(ctx context.Context, pid int) int64 {
	var peak int64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if n, err := rss(pid); err == nil {
			peak = max(peak, n)
		}
		select {
		case <-ctx.Done():
			return peak
		case <-tick.C:
		}
	}
}

// rss is a process's resident memory in bytes (VmRSS); 0 for pid 0.
func rss(pid int) (int64, error) {
	if pid == 0 {
		return 0, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("server memory: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("server memory: no VmRSS in /proc status")
}
