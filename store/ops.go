package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/idemindex"
	"github.com/cardboxhq/cardbox/store/internal/damage"
	"github.com/cardboxhq/cardbox/store/internal/groupcommit"
	"github.com/cardboxhq/cardbox/store/internal/memindex"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/internal/usage"
)

// MaxPayload is the largest uncompressed payload or blob the store takes:
// the binary protocol's 64 MiB frame cap less room for a response's other
// fields, so that whatever is stored can also be read back in one frame.
const MaxPayload = 64<<20 - 64<<10

// Limits on the declared type id and the idempotency key: both are indexed
// in Postgres, whose index entries hold at most about 2.7 kB.
const (
	MaxTypeIDLen         = 1024
	MaxIdempotencyKeyLen = 1024
)

// maxListBytes caps the payload bytes of one Last/Before answer so that it
// fits a protocol frame; older turns past it are left out.
const maxListBytes = 48 << 20

// maxListTurns caps how many turns one Last/Before answer walks.
const maxListTurns = 100_000

// Compression values of APPEND_TURN.
const (
	CompressionNone = 0
	CompressionZstd = 1
)

// EncodingMsgpack is the one payload encoding of APPEND_TURN (the
// official clients send it, 0 included, as 1).
const EncodingMsgpack = 1

// zstdDecoder is shared: DecodeAll is safe for concurrent use. It decodes
// no further than the capacity of the buffer it is given, which is the
// length the client declared: a small frame that inflates past it (a
// bomb) costs what it declared, not MaxPayload.
var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxPayload), zstd.WithDecoderConcurrency(0),
	zstd.WithDecodeAllCapLimit(true))

// Append verifies the payload (length, decompression, BLAKE3) in the
// caller's goroutine, so appends verify in parallel, then hands the turn to
// the committer and waits until it is durable.
func (e *Engine) Append(ctx context.Context, t ident.Tenant, req *AppendRequest) (AppendResult, error) {
	if err := e.admit(t); err != nil {
		return AppendResult{}, err
	}
	e.claims.NotePayload(t.No, req.ContentHash, req.FSRoot != nil)
	leave := true // unless a job still in flight takes the gate over
	defer func() {
		if leave {
			e.gate.Leave()
		}
	}()
	if _, err := e.contextOf(t, req.ContextID); err != nil {
		return AppendResult{}, err
	}
	if err := checkAppendFields(req); err != nil {
		return AppendResult{}, err
	}
	raw, err := uncompressed(req)
	if err != nil {
		return AppendResult{}, err
	}
	if ident.HashOf(raw) != req.ContentHash {
		return AppendResult{}, fault.New(fault.Conflict, "content hash mismatch: payload does not hash to %x", req.ContentHash)
	}
	if req.FSRoot != nil {
		if err := e.checkFSRoot(ctx, t, *req.FSRoot); err != nil {
			return AppendResult{}, err
		}
	}
	// The mark first: the planner finds every key memory held at it,
	// unless told the mark is stale (idemindex.Table.Stale).
	mark := e.idem.Mark()
	var key idemindex.Key
	if len(req.IdempotencyKey) > 0 {
		key = idemindex.NewKey(t.No, req.ContextID, req.IdempotencyKey)
		if e.idem.MayMiss(key, e.now().Add(-IdempotencyWindow)) {
			if res, found, err := e.replayFromDB(ctx, t, req); found || err != nil {
				return res, err
			}
		}
	}
	if err := e.admitBlob(ctx, t, req.ContentHash, len(raw), TurnCharge); err != nil {
		return AppendResult{}, err
	}
	e.tenants.learn(t)
	j := &groupcommit.Job{Tenant: t, Request: req, Raw: raw, Hash: req.ContentHash,
		IdemMark: mark, IdemKey: key, IdemKeySet: len(req.IdempotencyKey) > 0}
	if e.opts.OnAppendPayloads > 0 && len(raw) <= e.opts.OnAppendPayloads {
		// Copied here, on the caller's goroutine rather than the
		// committer's: raw may be the request's buffer, which its
		// connection reuses once answered.
		j.Handed = bytes.Clone(raw)
	}
	e.encodeBlob(j, req)
	o, handedOff := e.submit(ctx, j)
	leave = !handedOff
	return o.Result, o.Err
}

// packCompressMax is the largest blob the pack compresses itself when the
// group is written; larger ones are compressed by their caller, in
// parallel and off the committer's path.
const packCompressMax = 4 << 10

// encodeBlob prepares the pack's stored form of a new blob in the caller's
// goroutine where that pays: a client's own zstd frame is kept when it is
// smaller, and a large blob is compressed here. A small blob is left to
// the pack (blobpack.Pack.Put), which compresses a group's blobs one after
// another on warm encoder tables: that costs markedly less CPU than
// compressing each on its own connection's goroutine, and adds little to
// the group's write.
func (e *Engine) encodeBlob(j *groupcommit.Job, req *AppendRequest) {
	clientFrame := req != nil && req.Compression == CompressionZstd && len(req.Payload) < len(j.Raw)
	if !clientFrame && len(j.Raw) <= packCompressMax {
		return // the pack compresses it, if it is new (the plan looks it up)
	}
	if _, ok := e.blobs.Lookup(j.Hash); ok {
		return
	}
	if clientFrame {
		j.Stored, j.Codec = req.Payload, blobpack.CodecZstd
		return
	}
	j.Stored, j.Codec = blobpack.Encode(j.Raw)
}

// checkAppendFields refuses what Postgres could not store, before anything
// is queued: a bad append must fail alone, not the group it would join.
func checkAppendFields(req *AppendRequest) error {
	switch {
	case req.Encoding != EncodingMsgpack:
		return fault.New(fault.Invalid, "unsupported encoding: %d (1 = msgpack)", req.Encoding)
	case len(req.TypeID) > MaxTypeIDLen:
		return fault.New(fault.Unprocessable, "declared_type_id of %d bytes exceeds the %d-byte limit", len(req.TypeID), MaxTypeIDLen)
	case strings.IndexByte(req.TypeID, 0) >= 0:
		return fault.New(fault.Unprocessable, "declared_type_id contains a NUL byte")
	case !utf8.ValidString(req.TypeID):
		return fault.New(fault.Invalid, "declared_type_id is not UTF-8")
	case len(req.IdempotencyKey) > MaxIdempotencyKeyLen:
		return fault.New(fault.Unprocessable, "idempotency_key of %d bytes exceeds the %d-byte limit", len(req.IdempotencyKey), MaxIdempotencyKeyLen)
	case req.UncompressedLen > MaxPayload:
		return fault.New(fault.Unprocessable, "uncompressed length %d exceeds the %d-byte limit", req.UncompressedLen, MaxPayload)
	}
	return nil
}

// uncompressed returns the payload's original bytes, checked against the
// declared length.
func uncompressed(req *AppendRequest) ([]byte, error) {
	switch req.Compression {
	case CompressionNone:
		if uint32(len(req.Payload)) != req.UncompressedLen || len(req.Payload) != int(req.UncompressedLen) {
			return nil, fault.New(fault.Conflict, "uncompressed length mismatch: declared %d, payload has %d bytes", req.UncompressedLen, len(req.Payload))
		}
		return req.Payload, nil
	case CompressionZstd:
		raw, err := zstdDecoder.DecodeAll(req.Payload, make([]byte, 0, req.UncompressedLen))
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrFrameSizeExceeded) {
			return nil, fault.New(fault.Conflict, "uncompressed length mismatch: declared %d, payload decompresses to more", req.UncompressedLen)
		}
		if err != nil {
			return nil, fault.Wrap(fault.Unprocessable, err, "zstd decode failed")
		}
		if len(raw) != int(req.UncompressedLen) {
			return nil, fault.New(fault.Conflict, "uncompressed length mismatch: declared %d, payload decompresses to %d bytes", req.UncompressedLen, len(raw))
		}
		return raw, nil
	default:
		return nil, fault.New(fault.Unprocessable, "unsupported compression: %d (0 = none, 1 = zstd)", req.Compression)
	}
}

// Last returns up to limit turns ending at the context's head, oldest first.
func (e *Engine) Last(ctx context.Context, t ident.Tenant, contextID uint64, limit uint32, withPayload bool) ([]Turn, error) {
	s, err := e.contextOf(t, contextID)
	if err != nil {
		return nil, err
	}
	return e.walk(t, s.Head, limit, withPayload)
}

// Before returns up to limit turns older than beforeTurnID, oldest first.
// The cursor must lie on the context's chain (it may be a turn the context
// shares with the context it was forked from).
func (e *Engine) Before(ctx context.Context, t ident.Tenant, contextID, beforeTurnID uint64, limit uint32, withPayload bool) ([]Turn, error) {
	if beforeTurnID == 0 {
		return e.Last(ctx, t, contextID, limit, withPayload)
	}
	s, err := e.contextOf(t, contextID)
	if err != nil {
		return nil, err
	}
	cursor, ok := e.turnOf(t, beforeTurnID)
	if !ok || !e.onChain(s.Head, beforeTurnID, cursor.Depth) {
		return nil, fault.New(fault.NotFound, "turn %d not found in context %d", beforeTurnID, contextID)
	}
	return e.walk(t, cursor.Parent, limit, withPayload)
}

// onChain reports whether turn id (at depth) is an ancestor of head or head
// itself.
func (e *Engine) onChain(head, id uint64, depth uint32) bool {
	for head != 0 {
		m, ok := e.index.Turns.Get(head)
		if !ok || m.Depth < depth {
			return false
		}
		if m.Depth == depth {
			return head == id
		}
		head = m.Parent
	}
	return false
}

// walk collects up to limit turns from `from` towards the root and returns
// them oldest first.
func (e *Engine) walk(t ident.Tenant, from uint64, limit uint32, withPayload bool) ([]Turn, error) {
	n := min(int(limit), maxListTurns)
	out := make([]Turn, 0, min(n, 1024))
	budget := maxListBytes
	names := typeNames{types: e.index.Types, tenant: t.No}
	for id := from; id != 0 && len(out) < n; {
		m, ok := e.index.Turns.Get(id)
		if !ok {
			return nil, fault.New(fault.Internal, "turn %d: parent chain broken", id)
		}
		turn, err := e.turn(id, &m, names.name(m.TypeRef), withPayload)
		if err != nil {
			return nil, err
		}
		if budget -= len(turn.Payload); budget < 0 && len(out) > 0 {
			break
		}
		out = append(out, turn)
		id = m.Parent
	}
	slices.Reverse(out)
	return out, nil
}

// typeNames looks up a tenant's type names for one walk, remembering the
// last one: a chain's turns mostly share their type.
type typeNames struct {
	types  *memindex.TypeTable
	tenant uint32
	ref    uint32 // of last, when known
	last   string
	known  bool
}

func (n *typeNames) name(ref uint32) string {
	if !n.known || n.ref != ref {
		n.ref, n.last, n.known = ref, n.types.Name(n.tenant, ref), true
	}
	return n.last
}

// turn renders one turn. With a payload it reports it as the original
// bytes (compression 0, length = payload length), as CXDB does. The
// payload is read-only: it may be shared with the blob pack's cache. A
// payload whose bytes are damaged is left out and the turn marked
// (Turn.PayloadDamaged), counted and logged: the rest of a window still
// reads.
func (e *Engine) turn(id uint64, m *memindex.TurnMeta, typeID string, withPayload bool) (Turn, error) {
	turn := Turn{
		ID: id, ParentID: m.Parent, Depth: m.Depth, TypeID: typeID,
		TypeVersion: m.TypeVersion, Encoding: m.Encoding, Compression: m.Compression,
		UncompressedLen: m.UncompressedLen, Hash: m.Hash,
	}
	if !withPayload {
		return turn, nil
	}
	data, err := e.blobs.View(m.Hash)
	switch {
	case err == nil:
	case damage.Unreadable(err):
		e.damaged.Note(e.log, id, m.Hash, err)
		turn.Compression, turn.UncompressedLen, turn.PayloadDamaged = CompressionNone, 0, true
		return turn, nil
	default:
		return Turn{}, e.blobReadError(err, m.Hash, fmt.Sprintf("payload of turn %d", id))
	}
	turn.Payload, turn.Compression, turn.UncompressedLen = data, CompressionNone, uint32(len(data))
	return turn, nil
}

// GetBlob returns a blob the tenant owns. The bytes are read-only: they
// may be shared with the blob pack's cache.
func (e *Engine) GetBlob(ctx context.Context, t ident.Tenant, h ident.Hash) ([]byte, error) {
	return e.GetBlobWithin(ctx, t, h, nil)
}

// GetBlobWithin is GetBlob asking room (when not nil) for the blob's
// uncompressed size, from the pack's index, before it reads the bytes:
// an error from room is returned and the blob left unread. Room is asked
// only of a blob the tenant owns, so that its answer tells nothing of
// other tenants' blobs; a blob the index does not hold (damaged, lost)
// is not asked for, as its read fails.
func (e *Engine) GetBlobWithin(ctx context.Context, t ident.Tenant, h ident.Hash, room func(n int64) error) ([]byte, error) {
	ok, err := e.ownsBlob(ctx, t, h)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fault.New(fault.NotFound, "blob %x not found", h)
	}
	if entry, stored := e.blobs.Lookup(h); stored && room != nil {
		if err := room(int64(entry.RawLen)); err != nil {
			return nil, err
		}
	}
	data, err := e.blobs.View(h)
	if err != nil {
		return nil, e.blobReadError(err, h, "blob")
	}
	return data, nil
}

// ownsBlob reports whether the blob is stored and the tenant may read it:
// it stored it first (recorded in the pack) or was granted it. A blob in
// a damaged record of the pack is stored too (its owner as blobs.idx
// recorded it), so that its owner hears it is damaged, not that it was
// never stored; so is one missing from the pack that a committed turn of
// the tenant names (see lostBlobs: still the tenant's once another tenant
// stored the bytes again, which made that one their first storer) or the
// tenant holds a claim to (a row of tenant_blobs is written only for bytes
// the pack held: the blob lies in a hole whose blob is unknown). Every answer but the first storer's
// and those lost turns' asks Postgres, a blob never stored too: were that
// one answered from the pack alone, its speed would tell a tenant whether
// another tenant stored the bytes. What is asked, and how, depends on
// nothing but the tenant's own blobs. A first storer that released its
// claim (see releaseClaims) owns the blob only through a grant, as any
// other tenant, and is asked of Postgres as for a blob never stored.
func (e *Engine) ownsBlob(ctx context.Context, t ident.Tenant, h ident.Hash) (bool, error) {
	if e.gate.Gone(t.No) {
		return false, nil
	}
	entry, stored := e.blobs.Lookup(h)
	if !stored {
		if hole, damaged := e.blobs.HoleOf(h); damaged {
			entry, stored = blobpack.Entry{Hash: h, Owner: hole.Owner}, true
		}
	}
	if ((stored && entry.Owner == t.No) || e.lost.Of(t.No, h)) && !e.released(t, h) {
		return true, nil
	}
	claimed, err := e.as(pgrole.Tenant, t.ID).TenantOwnsBlob(ctx, storedb.TenantOwnsBlobParams{TenantID: t.ID, BlobHash: h[:]})
	if err != nil {
		return false, fault.Wrap(fault.Unavailable, err, "look up blob %x", h)
	}
	return claimed, nil
}

// PutBlob stores data under h after checking that it hashes to h.
func (e *Engine) PutBlob(ctx context.Context, t ident.Tenant, h ident.Hash, data []byte) (bool, error) {
	if err := e.admit(t); err != nil {
		return false, err
	}
	e.claims.NotePut(t.No, h)
	leave := true // unless a job still in flight takes the gate over
	defer func() {
		if leave {
			e.gate.Leave()
		}
	}()
	if len(data) > MaxPayload {
		return false, fault.New(fault.Unprocessable, "blob of %d bytes exceeds the %d-byte limit", len(data), MaxPayload)
	}
	if ident.HashOf(data) != h {
		return false, fault.New(fault.Conflict, "blob hash mismatch: data does not hash to %x", h)
	}
	if err := e.admitBlob(ctx, t, h, len(data), 0); err != nil {
		return false, err
	}
	// A compaction of the pack waits for the put, from its lookup to its
	// claim (see packCompaction.Dead).
	defer e.dedup.Enter().Leave()
	entry, ok := e.blobs.Lookup(h)
	if !ok {
		e.tenants.learn(t)
		j := &groupcommit.Job{Tenant: t, Raw: data, Hash: h}
		e.encodeBlob(j, nil)
		o, handedOff := e.submit(ctx, j)
		leave = !handedOff
		if o.Err != nil {
			return false, o.Err
		}
		entry = o.Entry
		if o.IsNew {
			if err := e.recordPut(ctx, t, h); err != nil {
				return false, err
			}
			return true, nil
		}
	}
	if entry.Owner == t.No && !e.released(t, h) {
		return false, e.recordPut(ctx, t, h)
	}
	// Recorded before the grant: the release of claims keeps a grant
	// whose upload is younger than its grace.
	if err := e.recordPut(ctx, t, h); err != nil {
		return false, err
	}
	if e.opts.putFound != nil {
		e.opts.putFound(h)
	}
	isNew, err := e.as(pgrole.Tenant, t.ID).GrantBlob(ctx, storedb.GrantBlobParams{TenantID: t.ID, BlobHash: h[:]})
	if err != nil {
		return false, fault.Wrap(fault.Unavailable, err, "grant blob %x", h)
	}
	e.usage.Grant(usage.Grant{Tenant: t.No, Hash: h}, int64(len(data)))
	return isNew, nil
}

// AttachFS records root as turnID's fs tree; the last attach wins.
func (e *Engine) AttachFS(ctx context.Context, t ident.Tenant, turnID uint64, root ident.Hash) error {
	if err := e.admit(t); err != nil {
		return err
	}
	e.claims.NoteUnsure(t.No)
	defer e.gate.Leave()
	if _, ok := e.turnOf(t, turnID); !ok {
		return fault.New(fault.NotFound, "turn %d not found", turnID)
	}
	if err := e.checkFSRoot(ctx, t, root); err != nil {
		return err
	}
	if err := e.checkQuota(ctx, t, 0); err != nil {
		return err
	}
	err := e.as(pgrole.Tenant, t.ID).AttachFS(ctx, storedb.AttachFSParams{TenantID: t.ID, TurnID: int64(turnID), FsRootHash: root[:]})
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "attach fs root to turn %d", turnID)
	}
	return nil
}
