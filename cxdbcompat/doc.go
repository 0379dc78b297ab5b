// Package cxdbcompat implements the CXDB binary protocol codec: frame
// reading and writing, request decoders and encoders, and response encoders
// and decoders, byte-compatible with what the official CXDB clients send and
// expect (see the cardbox CXDB compatibility reference, §1).
//
// The package is free of storage and networking concerns. It never allocates
// based on a length read from the wire beyond the size of the bytes actually
// received, and every decoder bounds-checks each length before slicing.
//
// # Aliasing
//
// Byte slices in decoded values (payloads, keys, blob data, metadata JSON)
// alias the input payload slice. A caller that keeps them after reusing the
// frame buffer must copy them first. Strings are always copies.
//
// # Encoding
//
// Encoders follow the append convention (AppendTo(dst) returns the extended
// slice) and allocate nothing beyond the growth of dst. Combine them with
// StartFrame and FinishFrame to build a complete frame in one buffer:
//
//	buf, start := cxdbcompat.StartFrame(buf[:0], cxdbcompat.MsgGetHead, 0, reqID)
//	buf = head.AppendTo(buf)
//	buf, err := cxdbcompat.FinishFrame(buf, start)
package cxdbcompat
