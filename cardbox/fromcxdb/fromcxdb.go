// Package fromcxdb makes a CardBox box from a CXDB context: each turn of
// the context's chain becomes a card, once per turn, so that a
// conversation written over the CXDB binary protocol can be assembled
// into a context window like any box.
package fromcxdb

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/cxdbcompat/turnpage"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// Turns is what derivation needs of CXDB: its turns rendered as the HTTP
// API renders them (*turnpage.Pages).
type Turns interface {
	Tenant(ctx context.Context, id string) (ident.Tenant, error)
	Turns(ctx context.Context, t ident.Tenant, contextID uint64, q service.TurnQuery) (*turnpage.Page, error)
}

// CardID is the id of the card derived from a turn.
func CardID(turnID uint64) string { return "cxdb-turn-" + strconv.FormatUint(turnID, 10) }

// Derive makes box boxID of project (created, or replaced) from the chain
// of context contextID of the same tenant, from its first turn up to
// upTo (the context's head when 0). A context of another tenant does not
// exist for it.
func Derive(ctx context.Context, cards *cardbox.Service, turns Turns, project, boxID string, contextID, upTo uint64) (cardbox.BoxEntries, error) {
	if contextID == 0 {
		return cardbox.BoxEntries{}, &fault.Error{Kind: fault.Invalid, Message: "context_id: required",
			Details: map[string]any{"parameter": "context_id"}}
	}
	t, err := turns.Tenant(ctx, project)
	if err != nil {
		return cardbox.BoxEntries{}, err
	}
	chain, err := readChain(ctx, turns, t, contextID, upTo)
	if err != nil {
		return cardbox.BoxEntries{}, err
	}
	derived := make([]cardbox.DerivedCard, 0, len(chain))
	for _, raw := range chain {
		d, err := cardOf(raw, contextID)
		if err != nil {
			return cardbox.BoxEntries{}, err
		}
		derived = append(derived, d)
	}
	return cards.SaveDerivedBox(ctx, project, boxID, derived)
}

// readChain returns the chain's turns, oldest first, rendered typed.
func readChain(ctx context.Context, turns Turns, t ident.Tenant, contextID, upTo uint64) ([]json.RawMessage, error) {
	q := service.TurnQuery{Limit: service.MaxTurnLimit, UpTo: upTo, View: service.ViewBoth,
		Render: projectionOptions}
	var chain []json.RawMessage
	for {
		page, err := turns.Turns(ctx, t, contextID, q)
		if err != nil {
			return nil, err
		}
		chain = append(page.Turns, chain...)
		if len(chain) > rules.MaxBoxCards {
			return nil, &fault.Error{Kind: fault.Unprocessable,
				Message: fmt.Sprintf("the chain has more than %d turns, more than a box holds", rules.MaxBoxCards)}
		}
		if !page.HasOlder || len(page.Turns) == 0 {
			return chain, nil
		}
		q = service.TurnQuery{Limit: service.MaxTurnLimit, Before: page.Oldest, View: service.ViewBoth, Render: projectionOptions}
	}
}

// turnJSON is what a card takes of a rendered turn.
type turnJSON struct {
	TurnID       string `json:"turn_id"`
	DeclaredType struct {
		TypeID      string `json:"type_id"`
		TypeVersion uint32 `json:"type_version"`
	} `json:"declared_type"`
	Hash  string          `json:"content_hash_b3"`
	Depth uint32          `json:"depth"`
	Error json.RawMessage `json:"error"`
	Data  json.RawMessage `json:"data"`
}

// cxdbMeta is metadata.cxdb of a derived card.
type cxdbMeta struct {
	ContextID   string `json:"context_id"`
	TurnID      string `json:"turn_id"`
	TurnHash    string `json:"turn_hash"`
	TypeID      string `json:"type_id"`
	TypeVersion uint32 `json:"type_version"`
	Depth       uint32 `json:"depth"`
}

// cardOf makes the card of one rendered turn: its typed projection as
// content (the turn's error when it has no projection), its role and
// type from the conversation item's kind, its tool call or the call it
// answers, and the turn's ids and hash in metadata.cxdb.
func cardOf(raw json.RawMessage, contextID uint64) (cardbox.DerivedCard, error) {
	var tj turnJSON
	if err := json.Unmarshal(raw, &tj); err != nil {
		return cardbox.DerivedCard{}, fmt.Errorf("read rendered turn: %w", err)
	}
	turnID, err := strconv.ParseUint(tj.TurnID, 10, 64)
	if err != nil {
		return cardbox.DerivedCard{}, fmt.Errorf("read rendered turn id %q: %w", tj.TurnID, err)
	}
	content := tj.Data
	if len(content) == 0 {
		content = json.RawMessage(`{"error":` + string(orNull(tj.Error)) + `}`)
	}
	kind := classify(content)
	meta, err := json.Marshal(map[string]any{
		"type": kind.typ, "role": kind.role,
		"cxdb": cxdbMeta{
			ContextID: strconv.FormatUint(contextID, 10), TurnID: tj.TurnID, TurnHash: tj.Hash,
			TypeID: tj.DeclaredType.TypeID, TypeVersion: tj.DeclaredType.TypeVersion, Depth: tj.Depth,
		},
	})
	if err != nil {
		return cardbox.DerivedCard{}, err
	}
	return cardbox.DerivedCard{
		Card: cardbox.NewCard{
			CardID: CardID(turnID), Content: content, Metadata: meta,
			ToolCalls: kind.toolCalls, ToolCallID: kind.toolCallID,
		},
		Type: kind.typ, ContextID: contextID, TurnID: turnID,
	}, nil
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}
