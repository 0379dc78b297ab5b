package cardbox

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cardbox/assembly"
	"github.com/cardboxhq/cardbox/cardbox/tokens"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// Formats of an assembly.
const (
	FormatCards    = "cards"
	FormatMessages = "messages"
)

// AssembleRequest asks for a box's context window.
type AssembleRequest struct {
	// Budget is the most tokens the window may take; at least 1.
	Budget int
	// Tokenizer is one of tokens.Names.
	Tokenizer string
	// Format is FormatCards (the default when "") or FormatMessages.
	Format string
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
	Zone            Zone
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

// BudgetError says a budget is smaller than the box's permanent zone.
type BudgetError struct {
	Budget, Permanent int
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("budget too small: the permanent zone takes %d tokens, %d more than the budget of %d",
		e.Permanent, e.Permanent-e.Budget, e.Budget)
}

// Assemble builds a box's context window within a token budget (see
// package assembly for the rule). The same box state, budget, tokenizer
// and format give the same bytes.
func (s *Service) Assemble(ctx context.Context, project, boxID string, req AssembleRequest) (Assembled, error) {
	if err := checkAssemble(&req); err != nil {
		return Assembled{}, err
	}
	box, err := s.Entries(ctx, project, boxID)
	if err != nil {
		return Assembled{}, err
	}
	facts, err := s.assemblyFacts(ctx, project, box.Entries, req.Tokenizer)
	if err != nil {
		return Assembled{}, err
	}
	out := Assembled{BoxID: boxID, Tokenizer: req.Tokenizer, Format: req.Format, Budget: req.Budget, LeftOut: []LeftOut{}, EntryIDs: []string{}}
	var items []assembly.Item
	var live []Entry
	for _, e := range box.Entries {
		f := facts[e.CardID]
		if reason := deadReason(e, f); reason != "" {
			out.LeftOut = append(out.LeftOut, LeftOut{EntryID: e.EntryID, CardID: e.CardID, Zone: e.Zone, Reason: reason})
			continue
		}
		live = append(live, e)
		items = append(items, assembly.Item{Zone: int(e.Zone), Tokens: int(f.Tokens), ToolCallIDs: f.ToolCallIds, ToolCallID: f.ToolCallID})
	}
	keep, err := assembly.Choose(items, req.Budget)
	var short *assembly.ShortError
	if errors.As(err, &short) {
		return Assembled{}, &BudgetError{Budget: short.Budget, Permanent: short.Permanent}
	}
	var kept []Entry
	for i, e := range live {
		if !keep[i] {
			out.LeftOut = append(out.LeftOut, LeftOut{EntryID: e.EntryID, CardID: e.CardID, Zone: e.Zone, Reason: LeftOutBudget, Tokens: items[i].Tokens})
			continue
		}
		kept = append(kept, e)
		out.EntryIDs = append(out.EntryIDs, e.EntryID)
		out.Tokens += items[i].Tokens
		out.Zones[e.Zone].Entries++
		out.Zones[e.Zone].Tokens += items[i].Tokens
	}
	if out.Window, err = s.window(ctx, project, kept, req.Format); err != nil {
		return Assembled{}, err
	}
	sum := blake3.Sum256(out.Window)
	out.Hash = "blake3:" + hex.EncodeToString(sum[:])
	return out, nil
}

func checkAssemble(req *AssembleRequest) error {
	if req.Budget <= 0 {
		return invalid("budget", "must be a positive number of tokens, got %d", req.Budget)
	}
	if !tokens.Known(req.Tokenizer) {
		return invalid("tokenizer", "unknown tokenizer %q; known tokenizers: %s", req.Tokenizer, strings.Join(tokens.Names, ", "))
	}
	switch req.Format {
	case "":
		req.Format = FormatCards
	case FormatCards, FormatMessages:
	default:
		return invalid("format", "unknown format %q; formats: %s, %s", req.Format, FormatCards, FormatMessages)
	}
	return nil
}

func deadReason(e Entry, f db.AssemblyCardsRow) string {
	switch {
	case e.Draft:
		return LeftOutDraft
	case !f.Found:
		return LeftOutMissing
	case f.Deleted:
		return LeftOutDeleted
	case f.Expired:
		return LeftOutExpired
	}
	return ""
}

// assemblyFacts reads what assembly needs of the entries' cards, counting
// the tokens of cards stored without a count under tokenizer (cards
// written before counts were stored).
func (s *Service) assemblyFacts(ctx context.Context, project string, entries []Entry, tokenizer string) (map[string]db.AssemblyCardsRow, error) {
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.CardID)
	}
	rows, err := s.as(project).AssemblyCards(ctx, db.AssemblyCardsParams{
		TenantID: project, CardIds: dedupe(ids), Tokenizer: tokenizer, Now: s.now(),
	})
	if err != nil {
		return nil, fmt.Errorf("read cards to assemble: %w", err)
	}
	facts := make(map[string]db.AssemblyCardsRow, len(rows))
	var uncounted []string
	for _, r := range rows {
		facts[r.CardID] = r
		if r.Found && r.Tokens < 0 {
			uncounted = append(uncounted, r.CardID)
		}
	}
	if len(uncounted) > 0 {
		cards, err := s.liveCards(ctx, project, uncounted)
		if err != nil {
			return nil, err
		}
		for id, c := range cards {
			n, err := tokens.Count(tokenizer, CardText(c.Content, c.ToolCalls))
			if err != nil {
				return nil, err
			}
			f := facts[id]
			f.Tokens = int32(n)
			facts[id] = f
		}
	}
	return facts, nil
}

// window renders the kept entries' cards as a JSON array, in format.
func (s *Service) window(ctx context.Context, project string, kept []Entry, format string) (json.RawMessage, error) {
	ids := make([]string, 0, len(kept))
	for _, e := range kept {
		ids = append(ids, e.CardID)
	}
	cards, err := s.liveJSON(ctx, project, dedupe(ids))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('[')
	n := 0
	for _, id := range ids {
		c, ok := cards[id]
		if !ok {
			continue // deleted since the facts were read
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		if format == FormatCards {
			b.Write(c)
			continue
		}
		m, err := message(c)
		if err != nil {
			return nil, err
		}
		b.Write(m)
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// chatMessage is a card as a chat completion message.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    *string         `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// message renders a card's JSON as a chat message: the role is
// metadata.role, the content the card's text (a JSON string as itself,
// other JSON as its text, null as null), with its tool calls and the id
// of the call it answers.
func message(card json.RawMessage) ([]byte, error) {
	var c struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
		ToolCallID *string         `json:"tool_call_id"`
	}
	if err := json.Unmarshal(card, &c); err != nil {
		return nil, fmt.Errorf("render message: %w", err)
	}
	m := chatMessage{Role: c.Role}
	if len(c.Content) > 0 && string(c.Content) != "null" {
		text := CardText(c.Content, nil)
		m.Content = &text
	}
	if len(c.ToolCalls) > 0 && string(c.ToolCalls) != "null" {
		m.ToolCalls = c.ToolCalls
	}
	if c.ToolCallID != nil {
		m.ToolCallID = *c.ToolCallID
	}
	return json.Marshal(m)
}
