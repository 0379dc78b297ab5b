package cardboxhttp

import (
	"encoding/json"
	"time"

	"github.com/cardboxhq/cardbox/api/internal/jsonbody"
	"github.com/cardboxhq/cardbox/cardbox"
)

// boxJSON is a box as the API renders it: box_id and card_ids are the
// public service's shape, the rest is added (and, in a hydrating batch
// read, hydrated_cards: boxesBatchBody).
type boxJSON struct {
	BoxID     string          `json:"box_id"`
	CardIDs   []string        `json:"card_ids"`
	ProjectID string          `json:"project_id"`
	ParentIDs []string        `json:"parent_ids"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

func renderBox(b cardbox.Box) boxJSON {
	return boxJSON{
		BoxID: b.BoxID, CardIDs: b.CardIDs, ProjectID: b.ProjectID, ParentIDs: b.ParentIDs,
		Metadata: b.Metadata, CreatedAt: b.CreatedAt.UTC(), UpdatedAt: b.UpdatedAt.UTC(),
	}
}

// Request and response bodies.
type (
	cardInput struct {
		CardID     string          `json:"card_id"`
		Content    json.RawMessage `json:"content"`
		Metadata   json.RawMessage `json:"metadata"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
		ToolCallID *string         `json:"tool_call_id"`
		TTLSeconds *int            `json:"ttl_seconds"`
		// Meta is the retired name of metadata; a card using it is refused.
		Meta json.RawMessage `json:"meta"`
	}
	// addCardsRequest is {"cards": [...]} or a bare card, not both.
	addCardsRequest struct {
		Cards *[]cardInput `json:"cards" strict:"alone"`
		cardInput
	}
	addCardsResponse struct {
		Cards cardsJSON `json:"cards"`
	}
	cardsBatchRequest struct {
		CardIDs []string `json:"card_ids"`
	}
	boxRequest struct {
		CardIDs   []string        `json:"card_ids"`
		ParentIDs []string        `json:"parent_ids"`
		Metadata  json.RawMessage `json:"metadata"`
	}
	appendRequest struct {
		CardIDs []string `json:"card_ids"`
	}
	boxesBatchRequest struct {
		BoxIDs  []string `json:"box_ids"`
		Hydrate bool     `json:"hydrate"`
		Limit   *int     `json:"limit"`
	}
)

func (in cardInput) toNewCard() cardbox.NewCard {
	c := cardbox.NewCard{
		CardID: in.CardID, Content: in.Content, Metadata: in.Metadata, ToolCalls: in.ToolCalls,
	}
	if in.ToolCallID != nil {
		c.ToolCallID = *in.ToolCallID
	}
	if in.TTLSeconds != nil {
		c.TTLSeconds = *in.TTLSeconds
	}
	return c
}

// appendedJSON answers an append: the box's new length and the cursor of
// the page that ends with the appended ids.
type appendedJSON struct {
	ProjectID string    `json:"project_id"`
	BoxID     string    `json:"box_id"`
	Length    int       `json:"length"`
	Cursor    string    `json:"cursor"`
	UpdatedAt time.Time `json:"updated_at"`
}

func renderAppended(a cardbox.Appended) appendedJSON {
	return appendedJSON{
		ProjectID: a.ProjectID, BoxID: a.BoxID, Length: a.Length,
		Cursor: a.Cursor(), UpdatedAt: a.UpdatedAt.UTC(),
	}
}

// DecodeFast decodes the common batch read, a bare list of card ids,
// without encoding/json (jsonbody.FastDecoder).
func (req *cardsBatchRequest) DecodeFast(body []byte) bool {
	ids, ok := jsonbody.ScanIDList(body, "card_ids")
	req.CardIDs = ids
	return ok
}
