package hostile

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
)

// replyTurns is how many turns the pipelined GET_LAST answers carry.
const replyTurns = 10

// cardPath is the card the run writes and checks.
const cardPath = "/projects/hostile/cards/hostile-card"

// dataset is what the run stored before the attacks, to check after.
type dataset struct {
	contextID uint64
	turns     []turnSum
	card      []byte
}

// turnSum is a stored turn as GET_LAST answers it.
type turnSum struct {
	id      uint64
	payload [32]byte // BLAKE3 of the payload
}

// setUp stores a context with replyTurns turns of about ReplyBytes in all,
// and one card.
func setUp(ctx context.Context, t Target, opts Options) (*dataset, error) {
	c, err := client.Dial(ctx, t.BinaryAddr, client.WithClientTag("hostile"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	for i := range replyTurns {
		req := &client.AppendRequest{
			ContextID: head.ContextID, TypeID: "hostile.Blob", TypeVersion: 1,
			Payload: msgpackBin(rng, opts.ReplyBytes/replyTurns), IdempotencyKey: fmt.Sprint("hostile-", i),
		}
		if _, err := c.AppendTurn(ctx, req); err != nil {
			return nil, fmt.Errorf("append turn %d: %w", i, err)
		}
	}
	d := &dataset{contextID: head.ContextID}
	if d.turns, err = lastTurns(ctx, c, head.ContextID); err != nil {
		return nil, err
	}
	body := `{"card_id":"hostile-card","content":{"attack":"survived"},"metadata":{"type":"task.instruction"}}`
	if _, err := httpDo(ctx, http.MethodPost, "http://"+t.HTTPAddr+"/projects/hostile/cards", body, http.StatusCreated); err != nil {
		return nil, err
	}
	if d.card, err = httpDo(ctx, http.MethodGet, "http://"+t.HTTPAddr+cardPath, "", http.StatusOK); err != nil {
		return nil, err
	}
	return d, nil
}

// msgpackBin is a msgpack bin 32 value of n random bytes: valid msgpack
// that zstd cannot shrink.
func msgpackBin(rng *rand.Rand, n int) []byte {
	b := make([]byte, 5+n)
	b[0] = 0xc6
	binary.BigEndian.PutUint32(b[1:5], uint32(n))
	for i := 5; i < len(b); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(b[i:], w[:])
	}
	return b
}

func lastTurns(ctx context.Context, c *client.Client, contextID uint64) ([]turnSum, error) {
	recs, err := c.GetLast(ctx, contextID, replyTurns, true)
	if err != nil {
		return nil, fmt.Errorf("GET_LAST: %w", err)
	}
	out := make([]turnSum, len(recs))
	for i, r := range recs {
		out[i] = turnSum{id: r.TurnID, payload: blake3.Sum256(r.Payload)}
	}
	return out, nil
}

// verify checks that the server answers and that the turns and the card
// read as before.
func (d *dataset) verify(ctx context.Context, t Target) error {
	if _, err := httpDo(ctx, http.MethodGet, "http://"+t.HTTPAddr+"/healthz", "", http.StatusOK); err != nil {
		return fmt.Errorf("after the attacks: %w", err)
	}
	c, err := client.Dial(ctx, t.BinaryAddr)
	if err != nil {
		return fmt.Errorf("after the attacks: %w", err)
	}
	defer c.Close()
	turns, err := lastTurns(ctx, c, d.contextID)
	if err != nil {
		return fmt.Errorf("after the attacks: %w", err)
	}
	if fmt.Sprint(turns) != fmt.Sprint(d.turns) {
		return fmt.Errorf("stored turns changed: %v, were %v", turns, d.turns)
	}
	card, err := httpDo(ctx, http.MethodGet, "http://"+t.HTTPAddr+cardPath, "", http.StatusOK)
	if err != nil {
		return fmt.Errorf("after the attacks: %w", err)
	}
	if !bytes.Equal(card, d.card) {
		return fmt.Errorf("stored card changed: %s, was %s", card, d.card)
	}
	return nil
}

// httpDo runs one request and wants status.
func httpDo(ctx context.Context, method, url, body string, status int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != status {
		return nil, fmt.Errorf("%s %s: status %d, want %d: %s", method, url, res.StatusCode, status, b)
	}
	return b, nil
}
