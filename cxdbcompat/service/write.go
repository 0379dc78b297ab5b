package service

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/cardboxhq/cardbox/cxdbcompat/typedjson"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store"
)

// JSONAppend is an append with its payload as JSON keyed by field names.
type JSONAppend struct {
	ContextID      uint64
	ParentTurnID   uint64 // 0: the head
	TypeID         string
	TypeVersion    uint32
	Data           json.RawMessage
	IdempotencyKey string
	// IfHead: commit only while ParentTurnID is the head (see
	// store.AppendRequest.IfHead).
	IfHead bool
}

// AppendJSON encodes the data with the registered type's tags (as the
// official Go client writes them, so it reads back like a turn it wrote)
// and appends it like the binary protocol's APPEND_TURN.
func (s *Service) AppendJSON(ctx context.Context, t ident.Tenant, a JSONAppend) (store.AppendResult, error) {
	if _, err := s.Context(t, a.ContextID); err != nil {
		return store.AppendResult{}, err
	}
	reg, err := s.Registry(ctx, t)
	if err != nil {
		return store.AppendResult{}, err
	}
	d, ok := reg.Descriptor(a.TypeID, a.TypeVersion)
	if !ok {
		return store.AppendResult{}, unprocessable(map[string]any{"field": "type_id", "type_id": a.TypeID, "type_version": a.TypeVersion},
			"type %s version %d is not in the registry", a.TypeID, a.TypeVersion)
	}
	payload, err := typedjson.Encode(a.Data, d, reg)
	if err != nil {
		return store.AppendResult{}, dataError(err)
	}
	return s.Append(ctx, t, &store.AppendRequest{
		ContextID: a.ContextID, ParentTurnID: a.ParentTurnID, TypeID: a.TypeID, TypeVersion: a.TypeVersion,
		Encoding: 1, UncompressedLen: uint32(len(payload)), ContentHash: ident.HashOf(payload),
		Payload: payload, IdempotencyKey: []byte(a.IdempotencyKey), IfHead: a.IfHead,
	})
}

func dataError(err error) error {
	var fe *typedjson.FieldError
	if errors.As(err, &fe) {
		field := "data"
		if fe.Path != "" {
			field = "data." + fe.Path
		}
		return unprocessable(map[string]any{"field": field}, "%s: %s", field, fe.Msg)
	}
	if errors.Is(err, typedjson.ErrNotObject) {
		return unprocessable(map[string]any{"field": "data"}, "data must be a JSON object")
	}
	return err
}
