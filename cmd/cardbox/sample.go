package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/loadgen"
	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// sampleConfig is what `cardbox sample` takes.
type sampleConfig struct {
	addr, httpAddr, key string
	contexts, turns     int
	forkEvery           int
	seed                uint64
}

// atLeastTwo accepts counts of 2 or more.
func atLeastTwo(v any) error {
	if n, _ := v.(int); n < 2 {
		return errors.New("must be at least 2")
	}
	return nil
}

func sampleCommand() *cli.Command {
	return &cli.Command{
		Name: "sample", Settings: []string{"binary-addr", "http-addr"},
		Purpose: "Publish the conversation bundle and write realistic conversations (tool calls, failures, forks, replays) to a running server, for trying SQL analytics.",
		Env:     map[string]string{"key": "CARDBOX_KEY"},
		Rules:   map[string]config.Rule{"contexts": config.Positive, "turns": atLeastTwo, "fork-every": config.NonNegative},
		Setup: func(fs *flag.FlagSet) cli.Action {
			c := &sampleConfig{}
			fs.StringVar(&c.key, "key", "", "API key of a hosted server's tenant (writer or admin)")
			fs.IntVar(&c.contexts, "contexts", 10, "conversations to write")
			fs.IntVar(&c.turns, "turns", 12, "turns per conversation (about)")
			fs.IntVar(&c.forkEvery, "fork-every", 4, "fork every Nth conversation from a turn of the one before (0: never)")
			fs.Uint64Var(&c.seed, "seed", 1, "random seed (the same seed writes the same conversations)")
			return func(ctx context.Context, inv *cli.Invocation) error {
				c.addr, c.httpAddr = inv.Config.BinaryAddr, inv.Config.HTTPAddr
				return sample(ctx, c, inv)
			}
		},
	}
}

// sample runs `cardbox sample`: it publishes the canonical conversation
// bundle over the HTTP API and writes realistic conversations over the
// binary protocol — user inputs, assistant turns with tool calls (some
// failing), legacy tool calls and results, system messages, handoffs,
// forks and idempotent replays — for trying SQL analytics
// (docs/analytics.md). Progress shows on a terminal.
func sample(ctx context.Context, cfg *sampleConfig, inv *cli.Invocation) error {
	progress := cli.NewProgress(inv.Stderr)
	progress.Show("publishing the conversation bundle at %s", cfg.httpAddr)
	client := &http.Client{Timeout: 30 * time.Second}
	if err := loadgen.PublishBundle(ctx, client, "http://"+cfg.httpAddr, cfg.key); err != nil {
		return err
	}
	c, err := loadgen.Dial(ctx, cfg.addr, cfg.key)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", cfg.addr, err)
	}
	defer c.Close()
	w := &sampleWriter{c: c, rng: rand.New(rand.NewPCG(cfg.seed, 0x5eed)), start: time.Now()}
	var prev []uint64 // the turns of the conversation before
	for i := range cfg.contexts {
		progress.Show("conversation %d of %d, %d turns written", i+1, cfg.contexts, w.turns)
		base := uint64(0)
		if cfg.forkEvery > 0 && i%cfg.forkEvery == cfg.forkEvery-1 && len(prev) > 1 {
			base = prev[w.rng.IntN(len(prev)-1)+1]
		}
		if prev, err = w.conversation(i, base, cfg.turns); err != nil {
			return fmt.Errorf("conversation %d: %w", i+1, err)
		}
	}
	progress.Done("")
	fmt.Fprintf(inv.Stdout, "wrote %d conversations, %d turns (%d replays), %d forks\n", cfg.contexts, w.turns, w.replays, w.forks)
	return nil
}

// sampleWriter writes the sample conversations on one connection.
type sampleWriter struct {
	c                     *loadgen.Conn
	rng                   *rand.Rand
	start                 time.Time
	turns, replays, forks int
}

// conversation writes one conversation (a fork of base when not 0) and
// returns its turn ids.
func (w *sampleWriter) conversation(n int, base uint64, turns int) ([]uint64, error) {
	ctxID, err := w.context(base)
	if err != nil {
		return nil, err
	}
	var ids []uint64
	add := func(item map[string]any, key string) error {
		item["3"] = w.start.Add(time.Duration(w.turns) * time.Second).UnixMilli() // timestamp
		id, err := w.append(ctxID, item, key)
		ids = append(ids, id)
		return err
	}
	if base == 0 {
		if err := add(firstItem(n), ""); err != nil {
			return nil, err
		}
	}
	for len(ids) < turns {
		for _, item := range w.exchange(len(ids)) {
			key := ""
			if w.rng.IntN(4) == 0 {
				key = fmt.Sprintf("sample-%d-%d", ctxID, len(ids))
			}
			if err := add(item, key); err != nil {
				return nil, err
			}
			if key != "" && w.rng.IntN(2) == 0 { // a client retrying: the same bytes
				if _, err := w.append(ctxID, item, key); err != nil {
					return nil, err
				}
				w.replays++
				w.turns--
			}
		}
	}
	return ids, nil
}

func (w *sampleWriter) context(base uint64) (uint64, error) {
	if base == 0 {
		return w.c.CreateContext()
	}
	w.forks++
	p, err := w.c.Call(cxdbcompat.CtxForkRequest{BaseTurnID: base})
	if err != nil {
		return 0, err
	}
	h, err := cxdbcompat.DecodeHeadResponse(p)
	return h.ContextID, err
}

// append writes item (msgpack with digit-string keys, as the official Go
// client writes it) and returns the turn id.
func (w *sampleWriter) append(ctxID uint64, item map[string]any, key string) (uint64, error) {
	payload, err := w.encode(item)
	if err != nil {
		return 0, err
	}
	p, err := w.c.Call(cxdbcompat.AppendTurnRequest{
		ContextID: ctxID, DeclaredTypeID: "cxdb.ConversationItem", DeclaredTypeVersion: 3,
		Encoding: cxdbcompat.EncodingMsgpack, UncompressedLen: uint32(len(payload)),
		ContentHash: blake3.Sum256(payload), Payload: payload, IdempotencyKey: []byte(key),
	})
	if err != nil {
		return 0, err
	}
	res, err := cxdbcompat.DecodeAppendTurnResponse(p)
	w.turns++
	return res.NewTurnID, err
}

// encode is item as msgpack, map keys sorted, so that a retry sends the
// same bytes.
func (w *sampleWriter) encode(item map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(item); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// firstItem is a conversation's first turn: the user's question and the
// context metadata (title, labels).
func firstItem(n int) map[string]any {
	item := userInput(sampleQuestions[n%len(sampleQuestions)])
	item["30"] = map[string]any{"1": "cardbox-sample", "2": fmt.Sprintf("Sample conversation %d", n+1),
		"3": []string{"sample", "env=dev"}}
	return item
}

var sampleQuestions = []string{
	"Summarize the quarterly report.", "Why does the build fail on main?", "Find the slowest endpoint.",
	"Draft a reply to the customer.", "Which tests are flaky?", "Plan the database migration.",
}

var sampleTools = []string{"read_file", "grep", "run_tests", "http_get", "write_file"}

func userInput(text string) map[string]any {
	return map[string]any{"1": "user_input", "2": "complete", "10": map[string]any{"1": text}}
}

// exchange is the next few turns after turn number i: mostly an assistant
// turn with tool calls, sometimes a legacy tool call and result, a system
// message, a handoff or a follow-up question.
func (w *sampleWriter) exchange(i int) []map[string]any {
	switch r := w.rng.IntN(10); {
	case r < 5:
		return []map[string]any{w.assistantTurn(i)}
	case r < 7:
		id := "call-" + strconv.Itoa(w.turns)
		tool := sampleTools[w.rng.IntN(len(sampleTools))]
		failed := w.rng.IntN(4) == 0
		return []map[string]any{
			{"1": "tool_call", "21": map[string]any{"1": id, "2": tool, "3": `{"q":"x"}`, "4": "sample call"}},
			{"1": "tool_result", "22": map[string]any{"1": id, "2": "output of " + tool, "3": failed, "7": int64(w.rng.IntN(900))}},
		}
	case r < 8:
		return []map[string]any{{"1": "system", "12": map[string]any{"1": "warning", "2": "Rate limit", "3": "slowing down"}}}
	case r < 9:
		return []map[string]any{{"1": "handoff", "13": map[string]any{"1": "planner", "2": "coder", "3": "delegate", "4": "implement it", "5": "needs code"}}}
	}
	return []map[string]any{userInput("And what about the details?")}
}

// assistantTurn is an assistant turn with zero to three tool calls, about
// one in five of which fails.
func (w *sampleWriter) assistantTurn(i int) map[string]any {
	var calls []map[string]any
	for k := range w.rng.IntN(4) {
		tool := sampleTools[w.rng.IntN(len(sampleTools))]
		call := map[string]any{"1": fmt.Sprintf("tc-%d-%d", w.turns, k), "2": tool, "3": `{"path":"README.md"}`,
			"10": int64(5 + w.rng.IntN(2000))}
		if w.rng.IntN(5) == 0 {
			call["4"] = "error"
			call["9"] = map[string]any{"1": "EXIT", "2": tool + " failed", "3": 1}
		} else {
			call["4"] = "complete"
			call["8"] = map[string]any{"1": "ok", "3": true, "4": 0}
		}
		calls = append(calls, call)
	}
	in := int64(200 + w.rng.IntN(4000))
	out := int64(20 + w.rng.IntN(800))
	return map[string]any{"1": "assistant_turn", "2": "complete", "11": map[string]any{
		"1": "Let me look into it.", "2": calls, "3": "", "5": "main", "6": int64(i), "7": int64(50), "8": "tool_use",
		"4": map[string]any{"1": in, "2": out, "3": in + out, "7": "sample-model"},
	}}
}
