package assembly

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/cardbox/tokens"
)

// Formats of an assembly.
const (
	FormatCards    = "cards"
	FormatMessages = "messages"
)

// Request asks for a box's context window.
type Request struct {
	// Budget is the most tokens the window may take; at least 1.
	Budget int
	// Tokenizer is one of tokens.Names.
	Tokenizer string
	// Format is FormatCards (the default when "") or FormatMessages.
	Format string
}

// Check validates r and fills in its default format.
func (r *Request) Check() error {
	if r.Budget <= 0 {
		return rules.Invalid("budget", "must be a positive number of tokens, got %d", r.Budget)
	}
	if !tokens.Known(r.Tokenizer) {
		return rules.Invalid("tokenizer", "unknown tokenizer %q; known tokenizers: %s", r.Tokenizer, strings.Join(tokens.Names, ", "))
	}
	switch r.Format {
	case "":
		r.Format = FormatCards
	case FormatCards, FormatMessages:
	default:
		return rules.Invalid("format", "unknown format %q; formats: %s, %s", r.Format, FormatCards, FormatMessages)
	}
	return nil
}

// Reasons an entry is left out of an assembly.
const (
	LeftOutBudget  = "budget"
	LeftOutDraft   = "draft"
	LeftOutDeleted = "deleted"
	LeftOutExpired = "expired"
	LeftOutMissing = "missing"
)

// LeftOut is an entry an assembly left out, and why.
type LeftOut struct {
	EntryID, CardID string
	Zone            layout.Zone
	Reason          string
	// Tokens is the card's count; 0 for cards that are not live.
	Tokens int
}

// ZoneTotal is what an assembly kept of one zone.
type ZoneTotal struct {
	Entries, Tokens int
}

// Assembled is a box's context window.
type Assembled struct {
	BoxID     string
	Tokenizer string
	Format    string
	Budget    int
	// Tokens is what the kept entries take.
	Tokens int
	// Zones are the totals of each zone, in Zone order.
	Zones [3]ZoneTotal
	// EntryIDs are the kept entries, in box order.
	EntryIDs []string
	// Window is the JSON array of the kept cards (or chat messages), in
	// box order; Hash is "blake3:" and the hex BLAKE3 hash of its bytes.
	Window  json.RawMessage
	Hash    string
	LeftOut []LeftOut
}

// Candidate is an entry of the box to assemble with what is known of its
// card: why it is left out whatever the budget (a draft, a card that is
// not live; "" for none), else the item Choose weighs.
type Candidate struct {
	Entry layout.Entry
	Dead  string
	Item  Item
}

// Plan chooses which of candidates (in box order) fit req's budget; it
// returns the assembly without its window and the kept entries, in box
// order, whose cards make the window (see SetWindow).
func Plan(boxID string, req Request, candidates []Candidate) (Assembled, []layout.Entry, error) {
	out := Assembled{BoxID: boxID, Tokenizer: req.Tokenizer, Format: req.Format, Budget: req.Budget,
		LeftOut: make([]LeftOut, 0, len(candidates)), EntryIDs: []string{}}
	items := make([]Item, 0, len(candidates))
	live := make([]int, 0, len(candidates)) // indexes in candidates
	for i := range candidates {
		c := &candidates[i]
		if c.Dead != "" {
			out.LeftOut = append(out.LeftOut, LeftOut{EntryID: c.Entry.EntryID, CardID: c.Entry.CardID, Zone: c.Entry.Zone, Reason: c.Dead})
			continue
		}
		live = append(live, i)
		items = append(items, c.Item)
	}
	keep, err := Choose(items, req.Budget)
	if err != nil {
		return Assembled{}, nil, err
	}
	var kept []layout.Entry
	for k, i := range live {
		e := &candidates[i].Entry
		if !keep[k] {
			out.LeftOut = append(out.LeftOut, LeftOut{EntryID: e.EntryID, CardID: e.CardID, Zone: e.Zone, Reason: LeftOutBudget, Tokens: items[k].Tokens})
			continue
		}
		kept = append(kept, *e)
		out.EntryIDs = append(out.EntryIDs, e.EntryID)
		out.Tokens += items[k].Tokens
		out.Zones[e.Zone].Entries++
		out.Zones[e.Zone].Tokens += items[k].Tokens
	}
	return out, kept, nil
}

// SetWindow sets the window and its hash.
func (a *Assembled) SetWindow(window []byte) {
	a.Window = window
	sum := blake3.Sum256(window)
	a.Hash = "blake3:" + hex.EncodeToString(sum[:])
}

// chatMessage is a card as a chat completion message.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    *string         `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// Message renders a card's JSON as a chat message: the role is
// metadata.role, the content the card's text (a JSON string as itself,
// other JSON as its text, null as null), with its tool calls and the id
// of the call it answers. version is the card's created_at in Unix
// microseconds, which names the card (see package cardcache).
func Message(card json.RawMessage) (message []byte, version int64, err error) {
	var c struct {
		CreatedAt  time.Time       `json:"created_at"`
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
		ToolCallID *string         `json:"tool_call_id"`
	}
	if err := json.Unmarshal(card, &c); err != nil {
		return nil, 0, fmt.Errorf("render message: %w", err)
	}
	m := chatMessage{Role: c.Role}
	if len(c.Content) > 0 && string(c.Content) != "null" {
		text := rules.CardText(c.Content, nil)
		m.Content = &text
	}
	if len(c.ToolCalls) > 0 && string(c.ToolCalls) != "null" {
		m.ToolCalls = c.ToolCalls
	}
	if c.ToolCallID != nil {
		m.ToolCallID = *c.ToolCallID
	}
	message, err = json.Marshal(m)
	return message, c.CreatedAt.UnixMicro(), err
}
