package sdk

// Capabilities are the protocol extensions a server announced. A server
// that announces none is served with what every CXDB-compatible server
// does, so each extension is an optimisation, never a requirement.
type Capabilities struct {
	// ConditionalAppend: appends may name the head they expect and fail
	// instead of branching when another writer moved it.
	ConditionalAppend bool
	// BlobsMissing: one HTTP request tells which of many blobs the server
	// lacks (POST /v1/blobs/missing); without it each blob is checked.
	BlobsMissing bool
}

// Capability bits a HELLO answer may carry after its 10 bytes, as a u64.
const (
	capConditionalAppend = 1 << 0
	capBlobsMissing      = 1 << 1
)

// parseCapabilities reads the capability bits that follow the HELLO
// answer of protocol version 1. Today's servers send none.
func parseCapabilities(extra []byte) Capabilities {
	if len(extra) < 8 {
		return Capabilities{}
	}
	var bits uint64
	for i := 7; i >= 0; i-- {
		bits = bits<<8 | uint64(extra[i])
	}
	return Capabilities{
		ConditionalAppend: bits&capConditionalAppend != 0,
		BlobsMissing:      bits&capBlobsMissing != 0,
	}
}
