package loadgen

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// hashCheckEvery is how often (in calls per connection) GetLast also
// checks every payload against its BLAKE3 content hash.
const hashCheckEvery = 64

// GetLast runs GET_LAST(limit, with payload) and checks the answer; it
// returns the number of turns.
func (c *Conn) GetLast(contextID uint64, limit uint32) (int, error) {
	p, err := c.Call(cxdbcompat.GetLastRequest{ContextID: contextID, Limit: limit, IncludePayload: true})
	if err != nil {
		return 0, err
	}
	c.calls++
	n, err := checkTurnList(p, limit, c.calls%hashCheckEvery == 0)
	if err != nil {
		return 0, fmt.Errorf("context %d: %w", contextID, err)
	}
	return n, nil
}

// turnFixed is the size of a turn record's fixed fields before the type
// id (turn_id, parent_turn_id, depth, type id length) and after it
// (version, encoding, compression, uncompressed_len, hash, payload_len).
const (
	turnHead = 8 + 8 + 4 + 4
	turnTail = 4*4 + cxdbcompat.HashSize + 4
)

var errShort = errors.New("turn list truncated")

// checkTurnList walks a GET_LAST answer without allocating and checks
// that it holds 1 to limit turns that form one chain (each the parent of
// the next, depth rising by one), each with its payload included whole
// (uncompressed, payload_len = uncompressed_len), and nothing after them.
// With hashes it also checks each payload's BLAKE3 against its hash.
func checkTurnList(p []byte, limit uint32, hashes bool) (int, error) {
	le := binary.LittleEndian
	if len(p) < 4 {
		return 0, errShort
	}
	count := le.Uint32(p)
	if count == 0 || count > limit {
		return 0, fmt.Errorf("%d turns, want 1 to %d", count, limit)
	}
	p = p[4:]
	var prevID uint64
	var prevDepth uint32
	for i := range count {
		if len(p) < turnHead {
			return 0, errShort
		}
		id, parent, depth := le.Uint64(p), le.Uint64(p[8:]), le.Uint32(p[16:])
		if i > 0 && (parent != prevID || depth != prevDepth+1) {
			return 0, fmt.Errorf("turn %d (parent %d, depth %d) does not follow turn %d (depth %d)", id, parent, depth, prevID, prevDepth)
		}
		prevID, prevDepth = id, depth
		typeLen := uint64(le.Uint32(p[20:]))
		if uint64(len(p)) < turnHead+typeLen+turnTail {
			return 0, errShort
		}
		p = p[turnHead+typeLen:]
		compression, rawLen, payloadLen := le.Uint32(p[8:]), le.Uint32(p[12:]), le.Uint32(p[48:])
		if compression != cxdbcompat.CompressionNone || payloadLen != rawLen || payloadLen == 0 {
			return 0, fmt.Errorf("turn %d: payload of %d bytes (compression %d, uncompressed_len %d), want it whole", id, payloadLen, compression, rawLen)
		}
		hash := p[16 : 16+cxdbcompat.HashSize]
		p = p[turnTail:]
		if uint64(len(p)) < uint64(payloadLen) {
			return 0, errShort
		}
		if hashes && blake3.Sum256(p[:payloadLen]) != [32]byte(hash) {
			return 0, fmt.Errorf("turn %d: payload does not match its content hash", id)
		}
		p = p[payloadLen:]
	}
	if len(p) != 0 {
		return 0, fmt.Errorf("%d bytes after the last turn", len(p))
	}
	return int(count), nil
}
