package cxdbcompat

// DecodeRequest decodes the payload of a request frame according to its
// message type and returns one of the request types of this package (as a
// value, e.g. AppendTurnRequest). Message types that are not served
// (GET_RANGE_BY_DEPTH, ERROR, unknown codes) yield an error wrapping
// ErrUnknownMessage; layout violations yield an error wrapping ErrMalformed.
//
// The returned request may alias payload. Servers on a hot path can call
// the typed decoders directly to avoid boxing the result in an interface.
func DecodeRequest(typ MsgType, flags uint16, payload []byte) (Request, error) {
	switch typ {
	case MsgHello:
		return boxed(DecodeHelloRequest(payload))
	case MsgCtxCreate:
		return boxed(DecodeCtxCreateRequest(payload))
	case MsgCtxFork:
		return boxed(DecodeCtxForkRequest(payload))
	case MsgGetHead:
		return boxed(DecodeGetHeadRequest(payload))
	case MsgAppendTurn:
		return boxed(DecodeAppendTurnRequest(flags, payload))
	case MsgGetLast:
		return boxed(DecodeGetLastRequest(payload))
	case MsgGetBefore:
		return boxed(DecodeGetBeforeRequest(payload))
	case MsgGetBlob:
		return boxed(DecodeGetBlobRequest(payload))
	case MsgAttachFS:
		return boxed(DecodeAttachFSRequest(payload))
	case MsgPutBlob:
		return boxed(DecodePutBlobRequest(payload))
	case MsgGetRangeByDepth:
		return nil, unknownMessage(typ, "not supported")
	default:
		return nil, unknownMessage(typ, "not a request")
	}
}

// boxed converts a typed decoder result into a Request, returning a nil
// interface (not a boxed zero value) on error.
func boxed[T Request](r T, err error) (Request, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}
