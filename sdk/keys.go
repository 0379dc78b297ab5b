package sdk

import (
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"

	"github.com/zeebo/blake3"
)

// maxReadableKey is the longest key kept readable; longer ones are
// hashed (the server takes keys up to 1 KiB).
const maxReadableKey = 200

// Key derives a deterministic idempotency key from stable correlation
// fields and a sequence number: the same fields and number always give
// the same key, different ones never collide (each field is escaped, so
// no separator can be forged). Keys longer than 200 bytes become
// "h:" and a BLAKE3 hash of the readable form.
func Key(seq uint64, fields ...string) string {
	var b strings.Builder
	for _, f := range fields {
		b.WriteString(url.PathEscape(f))
		b.WriteByte('/')
	}
	b.WriteString(strconv.FormatUint(seq, 10))
	k := b.String()
	if len(k) <= maxReadableKey {
		return k
	}
	h := blake3.Sum256([]byte(k))
	return "h:" + hex.EncodeToString(h[:])
}

// AgentKey is the agent pattern of the integration spec: session id,
// local turn index and event kind.
func AgentKey(sessionID string, localTurnIndex uint64, eventKind string) string {
	return Key(localTurnIndex, "agent", sessionID, eventKind)
}

// AttractorKey is the attractor pattern of the integration spec: run id,
// node id, stage attempt id, event kind and sequence number.
func AttractorKey(runID, nodeID, stageAttemptID, eventKind string, seq uint64) string {
	return Key(seq, "attractor", runID, nodeID, stageAttemptID, eventKind)
}

// Sequence hands out the sequence numbers of one logical stream, from 1.
// A runtime that replays the same execution path gets the same numbers,
// so its keys, and so its turns, are the same. It is not safe for
// concurrent use: a stream is ordered by definition.
type Sequence struct{ n uint64 }

// Next returns the next sequence number.
func (s *Sequence) Next() uint64 {
	s.n++
	return s.n
}
