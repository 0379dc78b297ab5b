package sdk

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/sdk/internal/wire"
)

// Mode says whether a runtime persists at all.
type Mode int

const (
	// Required: every write goes to the server and a failed write is the
	// caller's error.
	Required Mode = iota
	// Off: nothing is written and nothing fails; reads answer empty.
	Off
)

// Redactor rewrites a payload before it is encoded and sent, for
// example to drop secrets. It sees the declared type; an error fails the
// append before anything is sent.
type Redactor func(typeID string, typeVersion uint32, payload []byte) ([]byte, error)

// Config says where the server is and how to talk to it. Zero values
// mean the defaults in the field comments.
type Config struct {
	// Mode is Required (default) or Off.
	Mode Mode
	// BinaryAddr is the CXDB binary protocol's host:port
	// (127.0.0.1:9009).
	BinaryAddr string
	// HTTPURL is the HTTP API's base URL (http://127.0.0.1:9010).
	HTTPURL string
	// APIKey is a hosted server's key: sent in HELLO's client metadata
	// and as the HTTP bearer token. Dev-mode servers need none.
	APIKey string
	// ClientTag names this client in the server's session lists.
	ClientTag string
	// TLS, when set, makes the binary connections use TLS (give HTTPURL
	// an https:// scheme too).
	TLS *tls.Config
	// HTTPClient makes the HTTP requests (a client of its own).
	HTTPClient *http.Client
	// Conns is how many binary connections requests spread over (2).
	Conns int
	// DialTimeout bounds one dial and HELLO (5 s).
	DialTimeout time.Duration
	// RequestTimeout bounds one attempt of a request (30 s); the
	// caller's context bounds all attempts together.
	RequestTimeout time.Duration
	// MaxAttempts is how often a request is tried before it fails with
	// ErrUnavailable (8). Only connection failures, 429 and 503 are
	// retried; every request is safe to retry (appends by their key).
	MaxAttempts int
	// RetryBase and RetryMax bound the backoff between attempts
	// (50 ms doubling to 2 s).
	RetryBase, RetryMax time.Duration
	// CompressAbove sends payloads larger than this many bytes
	// zstd-compressed (0: never). The hash is always the uncompressed
	// bytes'.
	CompressAbove int
	// Redact, when set, runs on every payload before it is encoded.
	Redact Redactor
}

func (cfg Config) withDefaults() Config {
	if cfg.BinaryAddr == "" {
		cfg.BinaryAddr = "127.0.0.1:9009"
	}
	if cfg.HTTPURL == "" {
		cfg.HTTPURL = "http://127.0.0.1:9010"
	}
	cfg.HTTPURL = strings.TrimRight(cfg.HTTPURL, "/")
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if cfg.Conns <= 0 {
		cfg.Conns = 2
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 8
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 50 * time.Millisecond
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 2 * time.Second
	}
	return cfg
}

// Open returns the Store cfg describes: a Client for Required (connected
// lazily, so Open fails only on a bad Config), the Disabled store for Off.
// Config.Redact is applied either way.
func Open(cfg Config) (Store, error) {
	switch cfg.Mode {
	case Off:
		return Disabled(), nil
	case Required:
		return NewClient(cfg), nil
	}
	return nil, fmt.Errorf("%w: unknown persistence mode %d", ErrInvalid, cfg.Mode)
}

// Client is the network Store: the binary protocol for writes, blobs and
// newest-turn reads, the HTTP API for paging and the registry. It is safe
// for concurrent use; requests from many goroutines are pipelined over a
// few connections.
type Client struct {
	cfg  Config
	pool *pool
	http httpAPI
	// missingRoute remembers that the server has no batch blob check.
	missingRoute routeProbe
}

// NewClient returns a Client for cfg. It dials on first use, and again
// whenever a connection breaks.
func NewClient(cfg Config) *Client {
	cfg = cfg.withDefaults()
	c := &Client{cfg: cfg}
	c.pool = newPool(&c.cfg)
	c.http = httpAPI{cfg: &c.cfg}
	return c
}

// Dial is NewClient followed by a first connection, so that a wrong
// address or key shows at start-up.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	c := NewClient(cfg)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	if _, err := c.pool.get(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("dial: %w", err)
	}
	return c, nil
}

// Capabilities returns the extensions the server announced on the
// connections made so far.
func (c *Client) Capabilities() Capabilities { return c.pool.capabilities() }

// Close closes the connections and stops their reader goroutines.
func (c *Client) Close() error {
	c.pool.close()
	if t, ok := c.cfg.HTTPClient.Transport.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
	return nil
}

// call sends a request, retrying connection failures, 429 and 503 with
// backoff until it is answered, MaxAttempts is reached or ctx ends. An
// ERROR answer becomes *ServerError. what names the operation in errors.
func (c *Client) call(ctx context.Context, what string, typ, flags uint16, payload []byte, retry bool) ([]byte, error) {
	var last error
	for attempt := 1; ; attempt++ {
		f, err := c.attempt(ctx, typ, flags, payload)
		if err == nil {
			if f.Type == wire.MsgError {
				err = serverError(f.Payload)
			} else if f.Type != typ {
				return nil, fmt.Errorf("%s: answered with message type %d", what, f.Type)
			} else {
				return f.Payload, nil
			}
		}
		last = err
		if !retry || !retryable(err) {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if attempt >= c.cfg.MaxAttempts {
			return nil, fmt.Errorf("%s: %w after %d attempts: %w", what, ErrUnavailable, attempt, last)
		}
		t := time.NewTimer(backoff(&c.cfg, attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%s: %w (last failure: %v)", what, ctx.Err(), last)
		}
	}
}

func (c *Client) attempt(ctx context.Context, typ, flags uint16, payload []byte) (wire.Frame, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	conn, err := c.pool.get(ctx)
	if err != nil {
		return wire.Frame{}, err
	}
	// Checked on the connection that would carry it: a server restarted
	// as an older version would ignore the flag and append anyway.
	if typ == wire.MsgAppend && flags&wire.FlagIfHead != 0 && !conn.caps.ConditionalAppend {
		return wire.Frame{}, fmt.Errorf("%w: conditional append (the server announced no such capability)", ErrUnsupported)
	}
	return conn.roundTrip(ctx, typ, flags, payload)
}

// CreateContext implements Writer.
func (c *Client) CreateContext(ctx context.Context, base TurnID) (ContextHead, error) {
	return c.newContext(ctx, "create context", wire.MsgCtxCreate, base)
}

// ForkContext implements Writer.
func (c *Client) ForkContext(ctx context.Context, from TurnID) (ContextHead, error) {
	if from == "" {
		return ContextHead{}, fmt.Errorf("fork context: %w: no turn to fork from", ErrInvalid)
	}
	return c.newContext(ctx, "fork context from turn "+string(from), wire.MsgCtxFork, from)
}

// newContext creates or forks. A retry after a lost answer may leave an
// empty context behind on the server that nobody learns of; it holds no
// turns.
func (c *Client) newContext(ctx context.Context, what string, typ uint16, base TurnID) (ContextHead, error) {
	id, err := parseID("turn", string(base))
	if err != nil {
		return ContextHead{}, fmt.Errorf("%s: %w", what, err)
	}
	p, err := c.call(ctx, what, typ, 0, wire.U64(id), true)
	if err != nil {
		return ContextHead{}, err
	}
	return decodeHead(what, p)
}

func decodeHead(what string, p []byte) (ContextHead, error) {
	h, err := wire.DecodeHead(p)
	if err != nil {
		return ContextHead{}, fmt.Errorf("%s: decode answer: %w", what, err)
	}
	return ContextHead{ContextID: ContextID(formatID(h.ContextID)), HeadTurnID: TurnID(formatID(h.HeadTurnID)), HeadDepth: h.HeadDepth}, nil
}

// Head implements Writer.
func (c *Client) Head(ctx context.Context, id ContextID) (ContextHead, error) {
	what := "head of context " + string(id)
	n, err := parseID("context", string(id))
	if err != nil {
		return ContextHead{}, fmt.Errorf("%s: %w", what, err)
	}
	p, err := c.call(ctx, what, wire.MsgGetHead, 0, wire.U64(n), true)
	if err != nil {
		return ContextHead{}, err
	}
	return decodeHead(what, p)
}

// AppendTurn implements Writer. The request is encoded once and sent
// unchanged on every attempt, so a retry after a lost answer returns the
// turn the first attempt committed.
func (c *Client) AppendTurn(ctx context.Context, req AppendRequest) (StoredTurn, error) {
	what := "append to context " + string(req.ContextID)
	w, err := c.wireAppend(req)
	if err != nil {
		return StoredTurn{}, fmt.Errorf("%s: %w", what, err)
	}
	payload, flags := w.Encode()
	p, err := c.call(ctx, what, wire.MsgAppend, flags, payload, true)
	if err != nil {
		return StoredTurn{}, err
	}
	a, err := wire.DecodeAppended(p)
	if err != nil {
		return StoredTurn{}, fmt.Errorf("%s: decode answer: %w", what, err)
	}
	t := StoredTurn{
		ContextID: req.ContextID, TurnID: TurnID(formatID(a.TurnID)), ParentTurnID: req.ParentTurnID,
		Depth: a.Depth, TypeID: req.TypeID, TypeVersion: req.TypeVersion, ContentHash: hashHex(a.ContentHash),
	}
	if a.HasParent {
		t.ParentTurnID = TurnID(formatID(a.ParentTurnID))
	} else if req.ParentTurnID == "" && a.Depth > 1 && !req.IfHead {
		// The server chose the head, and its answer does not say which it
		// was (it is not cardbox, or an older one).
		parent, err := c.parentOf(ctx, w.ContextID, a.TurnID)
		if err != nil {
			return t, fmt.Errorf("%s: turn %s committed, but its parent could not be read: %w", what, t.TurnID, err)
		}
		t.ParentTurnID = parent
	}
	return t, nil
}

// wireAppend validates, redacts, hashes and (above CompressAbove)
// compresses an append.
func (c *Client) wireAppend(req AppendRequest) (wire.Append, error) {
	ctxID, err := parseID("context", string(req.ContextID))
	if err != nil {
		return wire.Append{}, err
	}
	if ctxID == 0 {
		return wire.Append{}, fmt.Errorf("%w: no context id", ErrInvalid)
	}
	parent, err := parseID("turn", string(req.ParentTurnID))
	if err != nil {
		return wire.Append{}, err
	}
	payload := req.Payload
	if c.cfg.Redact != nil {
		if payload, err = c.cfg.Redact(req.TypeID, req.TypeVersion, payload); err != nil {
			return wire.Append{}, fmt.Errorf("redact: %w", err)
		}
	}
	key := req.IdempotencyKey
	if key == "" {
		key = randomKey()
	}
	w := wire.Append{
		ContextID: ctxID, ParentTurnID: parent, TypeID: req.TypeID, TypeVersion: req.TypeVersion,
		UncompressedLen: uint32(len(payload)), ContentHash: blake3.Sum256(payload), Payload: payload,
		IdempotencyKey: key, IfHead: req.IfHead,
	}
	if req.FSRootHash != "" {
		root, err := parseHash(req.FSRootHash)
		if err != nil {
			return wire.Append{}, err
		}
		w.FSRoot = (*wire.Hash)(&root)
	}
	if c.cfg.CompressAbove > 0 && len(payload) > c.cfg.CompressAbove {
		w.Compression, w.Payload = wire.CompressionZstd, zstdEncoder.EncodeAll(payload, nil)
	}
	return w, nil
}

// zstdEncoder is shared; EncodeAll is safe for concurrent use and starts
// no goroutines.
var zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))

func randomKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "r:" + hex.EncodeToString(b[:])
}

// parentOf reads the parent of a turn: the one turn before it in its
// context.
func (c *Client) parentOf(ctx context.Context, ctxID, turnID uint64) (TurnID, error) {
	typ, p := wire.Turns{ContextID: ctxID, Before: turnID, Limit: 1}.Encode()
	ans, err := c.call(ctx, "read parent", typ, 0, p, true)
	if err != nil {
		return "", err
	}
	turns, err := wire.DecodeTurns(ans)
	if err != nil {
		return "", err
	}
	if len(turns) == 0 {
		return "", nil
	}
	return TurnID(formatID(turns[0].TurnID)), nil
}

// Last implements Writer.
func (c *Client) Last(ctx context.Context, id ContextID, limit int, includePayload bool) ([]StoredTurn, error) {
	what := "last turns of context " + string(id)
	n, err := parseID("context", string(id))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%s: %w: limit %d", what, ErrInvalid, limit)
	}
	typ, p := wire.Turns{ContextID: n, Limit: uint32(min(limit, 1<<31)), IncludePayload: includePayload}.Encode()
	ans, err := c.call(ctx, what, typ, 0, p, true)
	if err != nil {
		return nil, err
	}
	turns, err := wire.DecodeTurns(ans)
	if err != nil {
		return nil, fmt.Errorf("%s: decode answer: %w", what, err)
	}
	out := make([]StoredTurn, len(turns))
	for i, t := range turns {
		out[i] = StoredTurn{
			ContextID: id, TurnID: TurnID(formatID(t.TurnID)), ParentTurnID: TurnID(formatID(t.ParentTurnID)),
			Depth: t.Depth, TypeID: t.TypeID, TypeVersion: t.TypeVersion, ContentHash: hashHex(t.ContentHash),
		}
		if includePayload {
			out[i].Payload = append([]byte{}, t.Payload...)
		}
	}
	return out, nil
}

// PutBlob implements Artifacts.
func (c *Client) PutBlob(ctx context.Context, data []byte) (BlobHash, error) {
	h := blake3.Sum256(data)
	what := "put blob " + string(hashHex(h))
	p, err := c.call(ctx, what, wire.MsgPutBlob, 0, wire.PutBlob(h, data), true)
	if err != nil {
		return "", err
	}
	if _, _, err := wire.DecodePutBlob(p); err != nil {
		return "", fmt.Errorf("%s: decode answer: %w", what, err)
	}
	return hashHex(h), nil
}

// GetBlob implements Artifacts.
func (c *Client) GetBlob(ctx context.Context, hash BlobHash) ([]byte, error) {
	what := "get blob " + string(hash)
	h, err := parseHash(hash)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	p, err := c.call(ctx, what, wire.MsgGetBlob, 0, h[:], true)
	if err != nil {
		return nil, err
	}
	b, err := wire.DecodeBlob(p)
	if err != nil {
		return nil, fmt.Errorf("%s: decode answer: %w", what, err)
	}
	return append([]byte{}, b...), nil
}

// AttachFS implements Artifacts.
func (c *Client) AttachFS(ctx context.Context, turn TurnID, root BlobHash) error {
	what := fmt.Sprintf("attach fs %s to turn %s", root, turn)
	id, err := parseID("turn", string(turn))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	h, err := parseHash(root)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	_, err = c.call(ctx, what, wire.MsgAttachFS, 0, wire.AttachFS(id, h), true)
	return err
}
