package store

import (
	"strconv"
	"strings"
)

// keyedRequest is what an idempotency key stands for: an exact repeat of
// these is a retry and gets the original turn; anything else under the
// same key is a mistake the client must hear about.
type keyedRequest struct {
	hash        Hash // of the uncompressed payload
	typeID      string
	typeVersion uint32
	parent      uint64 // as sent: 0 means after the head
	parentKnown bool   // false for keys stored before the parent was
}

func requestOf(req *AppendRequest) keyedRequest {
	return keyedRequest{
		hash: req.ContentHash, typeID: req.TypeID, typeVersion: req.TypeVersion,
		parent: req.ParentTurnID, parentKnown: true,
	}
}

// checkRepeat returns a KindConflict error when req reuses the key of the
// append orig (which made turn) for something else; nil for an exact
// repeat. The error's details name the original turn and what differs.
func checkRepeat(req *AppendRequest, orig keyedRequest, turn uint64) error {
	var differs []string
	if req.ContentHash != orig.hash {
		differs = append(differs, "payload")
	}
	if req.TypeID != orig.typeID {
		differs = append(differs, "type_id")
	}
	if req.TypeVersion != orig.typeVersion {
		differs = append(differs, "type_version")
	}
	if orig.parentKnown && req.ParentTurnID != orig.parent {
		differs = append(differs, "parent_turn_id")
	}
	if len(differs) == 0 {
		return nil
	}
	err := errorf(KindConflict, "idempotency key %q was used for turn %d with a different %s; an exact repeat returns that turn, a different append needs a new key",
		req.IdempotencyKey, turn, strings.Join(differs, ", "))
	err.Details = map[string]any{
		"original_turn_id": strconv.FormatUint(turn, 10),
		"context_id":       strconv.FormatUint(req.ContextID, 10),
		"differs":          differs,
	}
	return err
}
