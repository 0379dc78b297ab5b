package groupcommit

import (
	"strconv"
	"strings"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/internal/storetype"
)

// KeyedRequest is what an idempotency key stands for: an exact repeat of
// these is a retry and gets the original turn; anything else under the
// same key is a mistake the client must hear about.
type KeyedRequest struct {
	Hash        ident.Hash // of the uncompressed payload
	TypeID      string
	TypeVersion uint32
	Parent      uint64 // as sent: 0 means after the head
	ParentKnown bool   // false for keys stored before the parent was
}

// requestOf is what req stands for under its idempotency key.
func requestOf(req *storetype.AppendRequest) KeyedRequest {
	return KeyedRequest{
		Hash: req.ContentHash, TypeID: req.TypeID, TypeVersion: req.TypeVersion,
		Parent: req.ParentTurnID, ParentKnown: true,
	}
}

// CheckRepeat returns a fault.Conflict error when req reuses the key of the
// append orig (which made turn) for something else; nil for an exact
// repeat. The error's details name the original turn and what differs.
func CheckRepeat(req *storetype.AppendRequest, orig KeyedRequest, turn uint64) error {
	var differs []string
	if req.ContentHash != orig.Hash {
		differs = append(differs, "payload")
	}
	if req.TypeID != orig.TypeID {
		differs = append(differs, "type_id")
	}
	if req.TypeVersion != orig.TypeVersion {
		differs = append(differs, "type_version")
	}
	if orig.ParentKnown && req.ParentTurnID != orig.Parent {
		differs = append(differs, "parent_turn_id")
	}
	if len(differs) == 0 {
		return nil
	}
	err := fault.New(fault.Conflict, "idempotency key %q was used for turn %d with a different %s; an exact repeat returns that turn, a different append needs a new key",
		req.IdempotencyKey, turn, strings.Join(differs, ", "))
	err.Details = map[string]any{
		"original_turn_id": strconv.FormatUint(turn, 10),
		"context_id":       strconv.FormatUint(req.ContextID, 10),
		"differs":          differs,
	}
	return err
}
