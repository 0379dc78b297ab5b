package cxdbcompat

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrMalformed is wrapped by every error reporting a payload that does
	// not follow the wire layout (truncated, bad length, invalid UTF-8).
	ErrMalformed = errors.New("malformed payload")
	// ErrUnknownMessage is wrapped by DecodeRequest for message types that
	// are not requests this protocol serves.
	ErrUnknownMessage = errors.New("unknown msg_type")
	// ErrFrameTooLarge is matched by a *FrameTooLargeError: a frame header
	// announced (or a caller tried to send) more than MaxPayload bytes.
	ErrFrameTooLarge = errors.New("frame payload too large")
)

// MalformedError describes a payload that does not follow the wire layout.
// It matches ErrMalformed under errors.Is.
type MalformedError struct {
	// Op is the message whose payload was being decoded, e.g. "append_turn".
	Op string
	// Field is the wire field being decoded, e.g. "idempotency_key".
	Field string
	// Reason is a human-readable explanation naming the field, e.g.
	// "payload truncated reading idempotency_key".
	Reason string
}

// Error returns "op: reason", e.g.
// "append_turn: payload truncated reading idempotency_key".
func (e *MalformedError) Error() string { return e.Op + ": " + e.Reason }

// Is reports whether target is ErrMalformed.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// FrameTooLargeError reports a frame whose payload length exceeds
// MaxPayload. When returned by ReadFrame the payload has NOT been read, so
// the stream is no longer aligned on a frame boundary. It matches
// ErrFrameTooLarge under errors.Is.
type FrameTooLargeError struct {
	// Len is the announced payload length.
	Len uint64
	// Type, Flags and ReqID are the remaining header fields.
	Type  MsgType
	Flags uint16
	ReqID uint64
}

// Error describes the oversize frame.
func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("frame %s req_id %d: payload length %d exceeds maximum %d",
		e.Type, e.ReqID, e.Len, MaxPayload)
}

// Is reports whether target is ErrFrameTooLarge.
func (e *FrameTooLargeError) Is(target error) bool { return target == ErrFrameTooLarge }

func malformed(op, field, reason string) *MalformedError {
	return &MalformedError{Op: op, Field: field, Reason: reason}
}

func unknownMessage(t MsgType, detail string) error {
	return fmt.Errorf("%s: %s: %w", t, detail, ErrUnknownMessage)
}
