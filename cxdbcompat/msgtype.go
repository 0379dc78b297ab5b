package cxdbcompat

import "strconv"

// MsgType identifies the kind of a frame (the msg_type header field).
type MsgType uint16

// Message types of the CXDB binary protocol (reference §1.3).
const (
	// MsgHello opens a session; optional for the server.
	MsgHello MsgType = 1
	// MsgCtxCreate creates a context whose head is a base turn (or empty).
	MsgCtxCreate MsgType = 2
	// MsgCtxFork forks a context from a base turn; same layout as MsgCtxCreate.
	MsgCtxFork MsgType = 3
	// MsgGetHead returns a context's head turn and depth.
	MsgGetHead MsgType = 4
	// MsgAppendTurn appends a turn to a context.
	MsgAppendTurn MsgType = 5
	// MsgGetLast returns the last turns of a context, oldest first.
	MsgGetLast MsgType = 6
	// MsgGetBefore pages older turns of a context (cardbox extension).
	MsgGetBefore MsgType = 7
	// MsgGetRangeByDepth is declared by CXDB but has no layout; unsupported.
	MsgGetRangeByDepth MsgType = 8
	// MsgGetBlob fetches a blob by hash.
	MsgGetBlob MsgType = 9
	// MsgAttachFS attaches a filesystem root tree to a turn.
	MsgAttachFS MsgType = 10
	// MsgPutBlob stores a blob.
	MsgPutBlob MsgType = 11
	// MsgError is the server's error response; never a request.
	MsgError MsgType = 255
)

var msgTypeNames = [...]string{
	MsgHello:           "HELLO",
	MsgCtxCreate:       "CTX_CREATE",
	MsgCtxFork:         "CTX_FORK",
	MsgGetHead:         "GET_HEAD",
	MsgAppendTurn:      "APPEND_TURN",
	MsgGetLast:         "GET_LAST",
	MsgGetBefore:       "GET_BEFORE",
	MsgGetRangeByDepth: "GET_RANGE_BY_DEPTH",
	MsgGetBlob:         "GET_BLOB",
	MsgAttachFS:        "ATTACH_FS",
	MsgPutBlob:         "PUT_BLOB",
}

// String returns the protocol name of t, e.g. "APPEND_TURN", or
// "MsgType(N)" for an unknown value.
func (t MsgType) String() string {
	if t == MsgError {
		return "ERROR"
	}
	if int(t) < len(msgTypeNames) && msgTypeNames[t] != "" {
		return msgTypeNames[t]
	}
	return "MsgType(" + strconv.Itoa(int(t)) + ")"
}
