package api

import (
	"encoding/json"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/appendjson"
)

// Card answers are rendered by hand rather than by encoding/json: card
// reads are the hot path. A card's JSON is cardbox.Card.AppendJSON; the
// JSON reads of the cardbox.Service return it ready-made (mostly from its
// cache), and the handlers join the cards into the answer.

// cardsJSON renders a list of cards.
type cardsJSON []cardbox.Card

// MarshalJSON implements json.Marshaler.
func (cs cardsJSON) MarshalJSON() ([]byte, error) {
	b := []byte{'['}
	for i := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = cs[i].AppendJSON(b)
	}
	return append(b, ']'), nil
}

// rawCards is a list of rendered cards.
type rawCards []json.RawMessage

// MarshalJSON implements json.Marshaler.
func (cs rawCards) MarshalJSON() ([]byte, error) {
	return appendjson.RawList(make([]byte, 0, appendjson.RawListLen(cs)), cs), nil
}

// sendJSON writes a pre-encoded JSON body.
func sendJSON(c echo.Context, status int, body []byte) error {
	return c.Blob(status, echo.MIMEApplicationJSON, body)
}

// cardsBatchBody renders {"cards": [...], "missing_ids": [...]}.
func cardsBatchBody(res cardbox.CardsJSON) []byte {
	b := make([]byte, 0, 64+appendjson.RawListLen(res.Cards)+len(res.MissingIDs)*32)
	b = append(b, `{"cards":`...)
	b = appendjson.RawList(b, res.Cards)
	b = append(b, `,"missing_ids":`...)
	b = appendjson.Strings(b, res.MissingIDs)
	return append(b, '}')
}
