package cardboxhttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/internal/appendjson"
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

// sendJSON writes a pre-encoded JSON body. With its length known, net/http
// sends it as is rather than in chunks.
//
// With ?pretty in the query the body is indented first, as echo's c.JSON
// indents the answers of the other routes: the same bytes encoding/json
// writes with two spaces of indent (the compact body is what it writes
// without).
func sendJSON(c echo.Context, status int, body []byte) error {
	if c.Request().URL.RawQuery != "" && c.QueryParams().Has("pretty") {
		var pretty bytes.Buffer
		pretty.Grow(len(body) + len(body)/4)
		if err := json.Indent(&pretty, body, "", "  "); err != nil {
			return fmt.Errorf("indent the answer: %w", err)
		}
		body = pretty.Bytes()
	}
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(body)))
	return c.Blob(status, echo.MIMEApplicationJSON, body)
}

// bodyPool recycles the buffers of card answers, which are tens of
// kilobytes: one new buffer per request was the largest allocation of a
// batch read.
var bodyPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBody caps the buffers kept in bodyPool; the rare larger ones
// go to the garbage collector.
const maxPooledBody = 1 << 20

// cardsBatchBody appends {"cards": [...], "missing_ids": [...]}.
func cardsBatchBody(b []byte, res cardbox.CardsJSON) []byte {
	b = append(b, `{"cards":`...)
	b = appendjson.RawList(b, res.Cards)
	b = append(b, `,"missing_ids":`...)
	b = appendjson.Strings(b, res.MissingIDs)
	return append(b, '}')
}

// cardsBatchSize is a capacity for cardsBatchBody.
func cardsBatchSize(res cardbox.CardsJSON) int {
	return 64 + appendjson.RawListLen(res.Cards) + len(res.MissingIDs)*(rules.MaxIDLength+3)
}
