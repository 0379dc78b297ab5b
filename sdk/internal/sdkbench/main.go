// Command sdkbench measures appends through the SDK: W goroutines append
// through one Client over --conns pipelined connections (64 in flight on
// one connection by default), to M contexts, with distinct 1 KiB msgpack
// payloads of text as `cardbox bench` sends, for a fixed duration. It is
// the SDK's side of the A/B in docs/performance.md.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cardboxhq/cardbox/sdk"
)

func main() {
	var (
		addr     = flag.String("binary-addr", "127.0.0.1:9009", "CXDB binary protocol address")
		key      = flag.String("key", os.Getenv("CARDBOX_KEY"), "API key of a hosted server")
		conns    = flag.Int("conns", 1, "pipelined connections the client uses")
		inflight = flag.Int("inflight", 64, "appends in flight (goroutines)")
		contexts = flag.Int("contexts", 64, "contexts the appends spread over")
		size     = flag.Int("size", 1024, "payload bytes")
		duration = flag.Duration("duration", 10*time.Second, "length of the append phase")
		profile  = flag.String("cpuprofile", "", "write this client's CPU profile of the run to this file")
	)
	flag.Parse()
	if *profile != "" {
		stop, err := startProfile(*profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sdkbench:", err)
			os.Exit(1)
		}
		defer stop()
	}
	if err := run(*addr, *key, *conns, *inflight, *contexts, *size, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "sdkbench:", err)
		os.Exit(1) //nolint:gocritic // the profile of a failed run is not wanted
	}
}

// startProfile starts a CPU profile into path; stop ends it.
func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "sdkbench: write profile:", err)
		}
	}, nil
}

func run(addr, key string, conns, inflight, contexts, size int, duration time.Duration) error {
	ctx := context.Background()
	c, err := sdk.Dial(ctx, sdk.Config{BinaryAddr: addr, APIKey: key, Conns: conns, ClientTag: "sdkbench"})
	if err != nil {
		return err
	}
	defer c.Close()
	ids := make([]sdk.ContextID, contexts)
	for i := range ids {
		h, err := c.CreateContext(ctx, "")
		if err != nil {
			return err
		}
		ids[i] = h.ContextID
	}
	var (
		done      atomic.Bool
		appends   atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		latencies []time.Duration
		firstErr  error
	)
	start, cpuStart := time.Now(), cpuTime()
	for w := range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gen := newPayloadGen(size, uint64(w))
			var mine []time.Duration
			for i := 0; !done.Load(); i++ {
				t0 := time.Now()
				_, err := c.AppendTurn(ctx, sdk.AppendRequest{
					ContextID: ids[(w+i)%len(ids)], TypeID: "cxdb.ConversationItem", TypeVersion: 3, Payload: gen.next(),
				})
				if err != nil {
					mu.Lock()
					firstErr = cmpOr(firstErr, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
				appends.Add(1)
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
	}
	time.Sleep(duration) // the phase's length: nothing to wait on
	done.Store(true)
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpuStart
	if firstErr != nil {
		return firstErr
	}
	slices.Sort(latencies)
	q := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("sdk: %d in flight on %d connection(s), %d contexts, payload %d B\n", inflight, conns, contexts, size)
	fmt.Printf("appends     %d\nappends/s   %.0f\nlatency     p50 %.3f ms  p99 %.3f ms\nCPU/append  %.0f µs (this client)\nload        %s",
		appends.Load(), float64(appends.Load())/elapsed.Seconds(), q(0.5), q(0.99),
		float64(cpu.Microseconds())/float64(appends.Load()), load)
	return nil
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// payloadGen makes distinct msgpack payloads of text, as cardbox bench
// does: one template whose 20-digit counter is rewritten.
type payloadGen struct {
	template []byte
	counter  int
	n        uint64
}

var words = strings.Fields("the agent reads a file then calls a tool and writes the answer with context " +
	"tokens model user assistant system result error retry plan step search code test build deploy")

const counterDigits = 20

func newPayloadGen(size int, seed uint64) *payloadGen {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var text strings.Builder
	text.WriteString(strings.Repeat("0", counterDigits))
	for text.Len() < size-40 {
		text.WriteString(" ")
		text.WriteString(words[rng.IntN(len(words))])
	}
	b, _ := msgpack.Marshal(map[string]any{"1": "user_input", "3": int64(1700000000000), "10": map[string]any{"1": text.String()}})
	return &payloadGen{template: b, counter: bytes.Index(b, []byte(strings.Repeat("0", counterDigits))), n: rand.Uint64()}
}

// next returns a fresh payload (a new slice: the SDK may keep it while
// retrying).
func (g *payloadGen) next() []byte {
	g.n++
	p := bytes.Clone(g.template)
	v := g.n
	for i := g.counter + counterDigits - 1; i >= g.counter; i-- {
		p[i] = byte('0' + v%10)
		v /= 10
	}
	return p
}
