package sdk

// Capabilities are the protocol extensions a server announced in its
// HELLO answer. The SDK asks for them in its HELLO metadata
// ({"capabilities": true}); a server that does not know the request (the
// CXDB reference, older cardbox) answers the plain 10 bytes and announces
// none, and each extension it lacks is then refused (ConditionalAppend)
// or done the long way, never silently dropped.
type Capabilities struct {
	// ConditionalAppend: appends may name the head they expect
	// (AppendRequest.IfHead) and fail with ErrHeadMoved instead of
	// branching when another writer moved it.
	ConditionalAppend bool
	// AppendParent: APPEND_TURN answers name the parent the server chose,
	// so an append after the head costs one request, not two.
	AppendParent bool
}

// capConditionalAppend is the capability bit of conditional appends in
// the u64 that follows a cardbox HELLO answer's 10 bytes.
const (
	capConditionalAppend = 1 << 0
	capAppendParent      = 1 << 1
)

// parseCapabilities reads the capability bits that follow the HELLO
// answer of protocol version 1; fewer than 8 bytes announce none.
func parseCapabilities(extra []byte) Capabilities {
	if len(extra) < 8 {
		return Capabilities{}
	}
	var bits uint64
	for i := 7; i >= 0; i-- {
		bits = bits<<8 | uint64(extra[i])
	}
	return Capabilities{ConditionalAppend: bits&capConditionalAppend != 0, AppendParent: bits&capAppendParent != 0}
}
