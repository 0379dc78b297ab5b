package cardbox

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cardbox/assembly"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/rules"
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
//
// It costs one query when the card and facts caches hold the box's cards
// (the box with the project's change counter), and one more for the cards
// they cannot vouch for (see facts.go).
func (s *Service) Assemble(ctx context.Context, project, boxID string, req AssembleRequest) (Assembled, error) {
	if err := checkAssemble(&req); err != nil {
		return Assembled{}, err
	}
	if err := checkBoxID(project, boxID); err != nil {
		return Assembled{}, err
	}
	now := s.now()
	q := s.as(project)
	row, err := q.AssemblyBox(ctx, db.AssemblyBoxParams{TenantID: project, BoxID: boxID})
	if isNoRows(err) {
		return Assembled{}, rules.NotFound("box", boxID)
	}
	if err != nil {
		return Assembled{}, fmt.Errorf("read entries of box %q: %w", boxID, err)
	}
	at := factsAt{now: now, stamp: uint64(row.CardChanges) + 1, exists: row.CardChanges >= 0, tokenizer: tokenizerIndex(req.Tokenizer)}
	entries, states, err := s.assemblyEntries(ctx, q, project, row, at)
	if err != nil {
		return Assembled{}, err
	}
	out := Assembled{BoxID: boxID, Tokenizer: req.Tokenizer, Format: req.Format, Budget: req.Budget, LeftOut: []LeftOut{}, EntryIDs: []string{}}
	items := make([]assembly.Item, 0, len(entries))
	live := make([]layout.Entry, 0, len(entries))
	for _, e := range entries {
		st := states[e.CardID]
		if reason := deadReason(e, st); reason != "" {
			out.LeftOut = append(out.LeftOut, LeftOut{EntryID: e.EntryID, CardID: e.CardID, Zone: e.Zone, Reason: reason})
			continue
		}
		live = append(live, e)
		items = append(items, assembly.Item{Zone: int(e.Zone), Tokens: int(st.facts.tokens[at.tokenizer]),
			ToolCallIDs: st.facts.toolCallIDs, ToolCallID: st.facts.toolCallID})
	}
	keep, err := assembly.Choose(items, req.Budget)
	var short *assembly.ShortError
	if errors.As(err, &short) {
		return Assembled{}, &BudgetError{Budget: short.Budget, Permanent: short.Permanent}
	}
	var kept []layout.Entry
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
	if out.Window, err = s.window(ctx, project, kept, req.Format, at); err != nil {
		return Assembled{}, err
	}
	sum := blake3.Sum256(out.Window)
	out.Hash = "blake3:" + hex.EncodeToString(sum[:])
	return out, nil
}

func checkAssemble(req *AssembleRequest) error {
	if req.Budget <= 0 {
		return rules.Invalid("budget", "must be a positive number of tokens, got %d", req.Budget)
	}
	if !tokens.Known(req.Tokenizer) {
		return rules.Invalid("tokenizer", "unknown tokenizer %q; known tokenizers: %s", req.Tokenizer, strings.Join(tokens.Names, ", "))
	}
	switch req.Format {
	case "":
		req.Format = FormatCards
	case FormatCards, FormatMessages:
	default:
		return rules.Invalid("format", "unknown format %q; formats: %s, %s", req.Format, FormatCards, FormatMessages)
	}
	return nil
}

// factsAt is the moment an assembly reads its cards at: the clock, the
// project's change counter as a cache stamp (see cardStamp) and whether
// the project has a live row, and the tokenizer's index in tokens.Names.
type factsAt struct {
	now       time.Time
	stamp     uint64
	exists    bool
	tokenizer int
}

// cardState is what an assembly knows of a card: its facts (the zone even
// when it is not live), and why it is not live ("" when it is).
type cardState struct {
	facts cardFacts
	dead  string
}

// assemblyEntries returns the box's entries in box order and the state of
// the cards of those that are not drafts, by card id.
func (s *Service) assemblyEntries(ctx context.Context, q *db.Queries, project string, row db.AssemblyBoxRow, at factsAt) ([]layout.Entry, map[string]cardState, error) {
	if row.Structured {
		l := layout.FromRows(row.CardIds, row.EntryIds, row.Zones, row.Positions, row.Drafts, row.EntrySeq)
		ids := make([]string, 0, len(l.Entries))
		for _, e := range l.Entries {
			if !e.Draft {
				ids = append(ids, e.CardID)
			}
		}
		states, err := s.cardStates(ctx, q, project, rules.Dedupe(ids), at)
		return l.Entries, states, err
	}
	// A plain box's entries take their zones from their cards' types, which
	// the same lookup gives.
	states, err := s.cardStates(ctx, q, project, rules.Dedupe(row.CardIds), at)
	if err != nil {
		return nil, nil, err
	}
	zones := make(map[string]layout.Zone, len(states))
	for id, st := range states {
		zones[id] = st.facts.zone
	}
	l, err := layout.Plain(row.CardIds, zones)
	if err != nil {
		return nil, nil, err
	}
	return l.Entries, states, nil
}

func deadReason(e layout.Entry, st cardState) string {
	if e.Draft {
		return LeftOutDraft
	}
	return st.dead
}

// cardStates returns the state of each card among distinct ids: from the
// facts cache for the cards it vouches for at at (with a count under the
// tokenizer), from Postgres for the others, counting the tokens of cards
// stored without a count under the tokenizer (cards written before counts
// were stored). It caches the facts of the live cards it read.
func (s *Service) cardStates(ctx context.Context, q *db.Queries, project string, ids []string, at factsAt) (map[string]cardState, error) {
	states := make(map[string]cardState, len(ids))
	var misses []string
	for _, id := range ids {
		if at.exists {
			if f, ok := s.cachedFacts(project, id, at.stamp, at.now); ok && f.tokens[at.tokenizer] >= 0 {
				states[id] = cardState{facts: f}
				continue
			}
		}
		misses = append(misses, id)
	}
	if len(misses) == 0 {
		return states, nil
	}
	rows, err := q.AssemblyCards(ctx, db.AssemblyCardsParams{
		TenantID: project, CardIds: misses, Tokenizers: tokens.Names, Now: at.now,
	})
	if err != nil {
		return nil, fmt.Errorf("read cards to assemble: %w", err)
	}
	var uncounted []string
	for _, r := range rows {
		st := cardState{facts: factsFromRow(r), dead: rowDeadReason(r)}
		states[r.CardID] = st
		if st.dead == "" && st.facts.tokens[at.tokenizer] < 0 {
			uncounted = append(uncounted, r.CardID)
		}
	}
	if err := s.countTokens(ctx, project, uncounted, at, states); err != nil {
		return nil, err
	}
	if at.exists {
		for _, r := range rows {
			if st := states[r.CardID]; st.dead == "" {
				// Read after the counter was: live at the stamp at least.
				s.cacheFacts(project, r.CardID, r.Version.UnixMicro(), at.stamp, &st.facts, r.Expires)
			}
		}
	}
	return states, nil
}

// rowDeadReason says why a card AssemblyCards read is not live, or "".
func rowDeadReason(r db.AssemblyCardsRow) string {
	switch {
	case !r.Found:
		return LeftOutMissing
	case r.Deleted:
		return LeftOutDeleted
	case r.Expired:
		return LeftOutExpired
	}
	return ""
}

// countTokens counts the tokens of the live cards among ids under the
// tokenizer into their states.
func (s *Service) countTokens(ctx context.Context, project string, ids []string, at factsAt, states map[string]cardState) error {
	if len(ids) == 0 {
		return nil
	}
	cards, err := s.liveCards(ctx, project, ids)
	if err != nil {
		return err
	}
	name := tokens.Names[at.tokenizer]
	for id, c := range cards {
		n, err := tokens.Count(name, rules.CardText(c.Content, c.ToolCalls))
		if err != nil {
			return err
		}
		st := states[id]
		st.facts.tokens[at.tokenizer] = int32(n)
		states[id] = st
	}
	return nil
}

// window renders the kept entries' cards as a JSON array, in format.
func (s *Service) window(ctx context.Context, project string, kept []layout.Entry, format string, at factsAt) (json.RawMessage, error) {
	ids := make([]string, 0, len(kept))
	for _, e := range kept {
		ids = append(ids, e.CardID)
	}
	cards, err := s.liveJSONAt(ctx, project, rules.Dedupe(ids), at.now, at.stamp, at.exists)
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
		text := rules.CardText(c.Content, nil)
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
