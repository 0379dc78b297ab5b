// Package fake is a deterministic in-memory sdk.Store with cardbox's
// semantics: ids from 1 in order of creation, the first turn of a chain
// at depth 1, appends after the head or an explicit parent, idempotency
// keys per context (an exact repeat returns the original turn, anything
// else under the key is ErrConflict), turn paging, registry bundles,
// blobs and fs snapshots whose every blob must be stored, and the same
// errors (errors.Is against sdk.ErrNotFound, ErrConflict, ErrInvalid).
//
// The same sequence of calls always gives the same ids, so tests of a
// runtime can compare whole transcripts. Fault lets a test make any
// operation fail, before or after it takes effect, as a lost connection
// would.
package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/cardboxhq/cardbox/sdk"
	"github.com/cardboxhq/cardbox/sdk/fstree"
)

// Store is the fake. The zero value is not usable; call New.
type Store struct {
	// Fault, when set, is asked before (committed false) and after
	// (committed true) each operation, named as the sdk method; an error
	// it returns is the operation's result. An error after the commit is
	// an answer lost on its way back: the effect stays.
	Fault func(op string, committed bool) error
	// Redact, when set, rewrites payloads before they are stored, as
	// sdk.Config.Redact does for the Client.
	Redact sdk.Redactor

	mu       sync.Mutex
	closed   bool
	nextCtx  uint64
	nextTurn uint64
	contexts map[uint64]*head
	turns    map[uint64]*turn
	keys     map[keyOf]keyed
	blobs    map[sdk.BlobHash][]byte
	fsRoots  map[uint64]sdk.BlobHash
	bundles  map[string][]byte
}

type head struct {
	turn  uint64
	depth uint32
}

type turn struct {
	id, parent uint64
	depth      uint32
	typeID     string
	version    uint32
	hash       sdk.BlobHash
}

type keyOf struct {
	ctx uint64
	key string
}

// keyed is what an idempotency key was first used for, as sent.
type keyed struct {
	turn, parentSent uint64
	typeID           string
	version          uint32
	hash             sdk.BlobHash
}

// New returns an empty fake.
func New() *Store {
	return &Store{
		contexts: map[uint64]*head{}, turns: map[uint64]*turn{}, keys: map[keyOf]keyed{},
		blobs: map[sdk.BlobHash][]byte{}, fsRoots: map[uint64]sdk.BlobHash{}, bundles: map[string][]byte{},
	}
}

var _ sdk.Store = (*Store)(nil)

func errorf(code int, kind, format string, args ...any) error {
	return &sdk.ServerError{Code: code, Kind: kind, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return errorf(404, "NOT_FOUND", format, args...)
}

func invalid(format string, args ...any) error {
	return errorf(400, "BAD_REQUEST", format, args...)
}

// op runs f under the lock between the two Fault calls.
func (s *Store) op(name string, f func() error) error {
	if s.Fault != nil {
		if err := s.Fault(name, false); err != nil {
			return err
		}
	}
	s.mu.Lock()
	var err error
	if s.closed {
		err = sdk.ErrClosed
	} else {
		err = f()
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if s.Fault != nil {
		return s.Fault(name, true)
	}
	return nil
}

func parseID(kind, id string) (uint64, error) {
	if id == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(id, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("%w: %s id %q is not one this server issued", sdk.ErrInvalid, kind, id)
	}
	return v, nil
}

func format(v uint64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatUint(v, 10)
}

// CreateContext implements sdk.Writer.
func (s *Store) CreateContext(ctx context.Context, base sdk.TurnID) (h sdk.ContextHead, err error) {
	err = s.op("CreateContext", func() error { h, err = s.newContext(base); return err })
	return h, err
}

// ForkContext implements sdk.Writer.
func (s *Store) ForkContext(ctx context.Context, from sdk.TurnID) (h sdk.ContextHead, err error) {
	if from == "" {
		return h, fmt.Errorf("ForkContext: %w: no turn to fork from", sdk.ErrInvalid)
	}
	err = s.op("ForkContext", func() error { h, err = s.newContext(from); return err })
	return h, err
}

func (s *Store) newContext(base sdk.TurnID) (sdk.ContextHead, error) {
	b, err := parseID("turn", string(base))
	if err != nil {
		return sdk.ContextHead{}, err
	}
	h := &head{}
	if b != 0 {
		t, ok := s.turns[b]
		if !ok {
			return sdk.ContextHead{}, notFound("base turn %d", b)
		}
		h.turn, h.depth = t.id, t.depth
	}
	s.nextCtx++
	s.contexts[s.nextCtx] = h
	return sdk.ContextHead{ContextID: sdk.ContextID(format(s.nextCtx)), HeadTurnID: sdk.TurnID(format(h.turn)), HeadDepth: h.depth}, nil
}

// Head implements sdk.Writer.
func (s *Store) Head(ctx context.Context, id sdk.ContextID) (h sdk.ContextHead, err error) {
	err = s.op("Head", func() error {
		c, hd, err := s.context(id)
		if err == nil {
			h = sdk.ContextHead{ContextID: sdk.ContextID(format(c)), HeadTurnID: sdk.TurnID(format(hd.turn)), HeadDepth: hd.depth}
		}
		return err
	})
	return h, err
}

func (s *Store) context(id sdk.ContextID) (uint64, *head, error) {
	c, err := parseID("context", string(id))
	if err != nil {
		return 0, nil, err
	}
	h, ok := s.contexts[c]
	if !ok {
		return 0, nil, notFound("context %d", c)
	}
	return c, h, nil
}

// AppendTurn implements sdk.Writer.
func (s *Store) AppendTurn(ctx context.Context, req sdk.AppendRequest) (t sdk.StoredTurn, err error) {
	payload := req.Payload
	if s.Redact != nil {
		if payload, err = s.Redact(req.TypeID, req.TypeVersion, payload); err != nil {
			return t, fmt.Errorf("AppendTurn: redact: %w", err)
		}
	}
	err = s.op("AppendTurn", func() error { t, err = s.appendTurn(req, payload); return err })
	return t, err
}

func (s *Store) appendTurn(req sdk.AppendRequest, payload []byte) (sdk.StoredTurn, error) {
	c, h, err := s.context(req.ContextID)
	if err != nil {
		return sdk.StoredTurn{}, err
	}
	parent, err := parseID("turn", string(req.ParentTurnID))
	if err != nil {
		return sdk.StoredTurn{}, err
	}
	hash := sdk.HashOf(payload)
	sent := keyed{parentSent: parent, typeID: req.TypeID, version: req.TypeVersion, hash: hash}
	if req.IdempotencyKey != "" {
		if k, ok := s.keys[keyOf{c, req.IdempotencyKey}]; ok {
			orig := k
			orig.turn = 0
			if orig != sent {
				return sdk.StoredTurn{}, &sdk.ServerError{Code: 409, Kind: "CONFLICT",
					Message: fmt.Sprintf("idempotency key %q was used for another append", req.IdempotencyKey),
					Details: map[string]any{"original_turn_id": format(k.turn), "context_id": format(c)}}
			}
			return s.stored(c, s.turns[k.turn]), nil
		}
	}
	if req.FSRootHash != "" {
		if err := s.checkTree(req.FSRootHash); err != nil {
			return sdk.StoredTurn{}, err
		}
	}
	if req.IfHead && parent != h.turn {
		return sdk.StoredTurn{}, &sdk.ServerError{Code: 409, Kind: "HEAD_MOVED",
			Message: fmt.Sprintf("context %d's head is turn %d, not turn %d", c, h.turn, parent),
			Details: map[string]any{"context_id": format(c), "head_turn_id": strconv.FormatUint(h.turn, 10),
				"head_depth": float64(h.depth), "expected_head": strconv.FormatUint(parent, 10)}}
	}
	var p *turn
	switch {
	case parent != 0:
		var ok bool
		if p, ok = s.turns[parent]; !ok {
			return sdk.StoredTurn{}, notFound("parent turn %d", parent)
		}
	case h.turn != 0:
		p = s.turns[h.turn]
	}
	s.nextTurn++
	t := &turn{id: s.nextTurn, typeID: req.TypeID, version: req.TypeVersion, hash: hash, depth: 1}
	if p != nil {
		t.parent, t.depth = p.id, p.depth+1
	}
	s.turns[t.id] = t
	s.blobs[hash] = append([]byte{}, payload...)
	h.turn, h.depth = t.id, t.depth
	if req.FSRootHash != "" {
		s.fsRoots[t.id] = req.FSRootHash
	}
	if req.IdempotencyKey != "" {
		sent.turn = t.id
		s.keys[keyOf{c, req.IdempotencyKey}] = sent
	}
	return s.stored(c, t), nil
}

func (s *Store) stored(c uint64, t *turn) sdk.StoredTurn {
	return sdk.StoredTurn{
		ContextID: sdk.ContextID(format(c)), TurnID: sdk.TurnID(format(t.id)), ParentTurnID: sdk.TurnID(format(t.parent)),
		Depth: t.depth, TypeID: t.typeID, TypeVersion: t.version, ContentHash: t.hash,
	}
}

// checkTree checks that every blob a snapshot root reaches is stored, as
// cardbox does before it attaches one.
func (s *Store) checkTree(root sdk.BlobHash) error {
	b, ok := s.blobs[root]
	if !ok {
		return notFound("fs root %s", root)
	}
	entries, err := fstree.DecodeTree(b)
	if err != nil {
		return invalid("fs root %s is not a tree object: %v", root, err)
	}
	for _, e := range entries {
		h := sdk.BlobHash(fmt.Sprintf("%x", e.Hash[:]))
		if e.Kind == fstree.Directory {
			if err := s.checkTree(h); err != nil {
				return err
			}
		} else if _, ok := s.blobs[h]; !ok {
			return notFound("blob %s of %s", h, e.Name)
		}
	}
	return nil
}

// Last implements sdk.Writer.
func (s *Store) Last(ctx context.Context, id sdk.ContextID, limit int, includePayload bool) (out []sdk.StoredTurn, err error) {
	err = s.op("Last", func() error {
		if limit <= 0 {
			return fmt.Errorf("%w: limit %d", sdk.ErrInvalid, limit)
		}
		c, h, err := s.context(id)
		if err == nil {
			out = s.walk(c, h.turn, limit, includePayload)
		}
		return err
	})
	return out, err
}

// walk returns up to limit turns from `from` towards the root, oldest
// first.
func (s *Store) walk(c, from uint64, limit int, includePayload bool) []sdk.StoredTurn {
	var out []sdk.StoredTurn
	for id := from; id != 0 && len(out) < limit; id = s.turns[id].parent {
		t := s.stored(c, s.turns[id])
		if includePayload {
			t.Payload = append([]byte{}, s.blobs[t.ContentHash]...)
		}
		out = append(out, t)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// maxPageTurns is the server's cap on one page.
const maxPageTurns = 10000

// ListTurns implements sdk.Reader.
func (s *Store) ListTurns(ctx context.Context, id sdk.ContextID, before sdk.TurnID, limit int) (out []sdk.StoredTurn, err error) {
	err = s.op("ListTurns", func() error {
		if limit <= 0 {
			return fmt.Errorf("%w: limit %d", sdk.ErrInvalid, limit)
		}
		c, h, err := s.context(id)
		if err != nil {
			return err
		}
		b, err := parseID("turn", string(before))
		if err != nil {
			return err
		}
		from := h.turn
		if b != 0 {
			if !s.onChain(h.turn, b) {
				return invalid("turn %d is not on the chain of context %d", b, c)
			}
			from = s.turns[b].parent
		}
		out = s.walk(c, from, min(limit, maxPageTurns), true)
		return nil
	})
	return out, err
}

func (s *Store) onChain(from, id uint64) bool {
	for t := from; t != 0; t = s.turns[t].parent {
		if t == id {
			return true
		}
	}
	return false
}

// PublishBundle implements sdk.Reader: the body must be a JSON object
// whose bundle_id is bundleID and whose registry_version is above 0.
func (s *Store) PublishBundle(ctx context.Context, bundleID string, bundleJSON []byte) error {
	return s.op("PublishBundle", func() error {
		var v struct {
			RegistryVersion uint32 `json:"registry_version"`
			BundleID        string `json:"bundle_id"`
		}
		if err := json.Unmarshal(bundleJSON, &v); err != nil {
			return errorf(422, "UNPROCESSABLE", "invalid json: %v", err)
		}
		if v.BundleID != bundleID || v.RegistryVersion == 0 {
			return errorf(422, "UNPROCESSABLE", "bundle_id %q (path %q) or registry_version %d is wrong", v.BundleID, bundleID, v.RegistryVersion)
		}
		if old, ok := s.bundles[bundleID]; ok {
			if string(old) != string(bundleJSON) {
				return errorf(409, "CONFLICT", "bundle_id %s already exists with different content", bundleID)
			}
			return nil
		}
		s.bundles[bundleID] = append([]byte{}, bundleJSON...)
		return nil
	})
}

// Bundle implements sdk.Reader.
func (s *Store) Bundle(ctx context.Context, bundleID string) (b []byte, err error) {
	err = s.op("Bundle", func() error {
		v, ok := s.bundles[bundleID]
		if !ok {
			return notFound("bundle %s", bundleID)
		}
		b = append([]byte{}, v...)
		return nil
	})
	return b, err
}

// PutBlob implements sdk.Artifacts.
func (s *Store) PutBlob(ctx context.Context, data []byte) (h sdk.BlobHash, err error) {
	err = s.op("PutBlob", func() error {
		h = sdk.HashOf(data)
		if _, ok := s.blobs[h]; !ok {
			s.blobs[h] = append([]byte{}, data...)
		}
		return nil
	})
	return h, err
}

// GetBlob implements sdk.Artifacts.
func (s *Store) GetBlob(ctx context.Context, hash sdk.BlobHash) (b []byte, err error) {
	err = s.op("GetBlob", func() error {
		if err := checkHash(hash); err != nil {
			return err
		}
		v, ok := s.blobs[hash]
		if !ok {
			return notFound("blob %s", hash)
		}
		b = append([]byte{}, v...)
		return nil
	})
	return b, err
}

func checkHash(h sdk.BlobHash) error {
	if len(h) != 64 {
		return fmt.Errorf("%w: blob hash %q is not 64 hex digits", sdk.ErrInvalid, h)
	}
	for _, c := range []byte(h) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w: blob hash %q is not lowercase hex", sdk.ErrInvalid, h)
		}
	}
	return nil
}

// MissingBlobs implements sdk.Artifacts.
func (s *Store) MissingBlobs(ctx context.Context, hashes []sdk.BlobHash) (out []sdk.BlobHash, err error) {
	err = s.op("MissingBlobs", func() error {
		for _, h := range hashes {
			if err := checkHash(h); err != nil {
				return err
			}
			if _, ok := s.blobs[h]; !ok {
				out = append(out, h)
			}
		}
		return nil
	})
	return out, err
}

// AttachFS implements sdk.Artifacts.
func (s *Store) AttachFS(ctx context.Context, turnID sdk.TurnID, root sdk.BlobHash) error {
	return s.op("AttachFS", func() error {
		id, err := parseID("turn", string(turnID))
		if err != nil {
			return err
		}
		if err := checkHash(root); err != nil {
			return err
		}
		if _, ok := s.turns[id]; !ok {
			return notFound("turn %d", id)
		}
		if err := s.checkTree(root); err != nil {
			return err
		}
		s.fsRoots[id] = root
		return nil
	})
}

// FSRoot returns the snapshot a turn has or inherits from its ancestors
// ("" if none): what the server's fs routes browse.
func (s *Store) FSRoot(turnID sdk.TurnID) sdk.BlobHash {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, _ := parseID("turn", string(turnID))
	for t := id; t != 0; t = s.turns[t].parent {
		if r, ok := s.fsRoots[t]; ok {
			return r
		}
		if _, ok := s.turns[t]; !ok {
			return ""
		}
	}
	return ""
}

// Close implements sdk.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}
