package cardbox

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/cardboxhq/cardbox/cardbox/assembly"
	"github.com/cardboxhq/cardbox/cardbox/cardcache"
	"github.com/cardboxhq/cardbox/cardbox/internal/cardboxdb"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/cardbox/tokens"
	"github.com/cardboxhq/cardbox/internal/appendjson"
)

// Assemble builds a box's context window within a token budget (see
// package assembly for the rule). The same box state, budget, tokenizer
// and format give the same bytes.
//
// An assembly of a box unchanged since the last one asks Postgres for the
// box's version and the project's change counter only (see prepared.go).
// Otherwise it costs one query when the card and facts caches hold the
// box's cards (the box with the project's change counter), and one more
// for the cards they cannot vouch for (see facts.go).
func (s *Service) Assemble(ctx context.Context, project, boxID string, req assembly.Request) (assembly.Assembled, error) {
	if err := req.Check(); err != nil {
		return assembly.Assembled{}, err
	}
	if err := checkBoxID(project, boxID); err != nil {
		return assembly.Assembled{}, err
	}
	now := s.now()
	q := s.as(project)
	p, at, err := s.prepare(ctx, q, project, boxID, factsAt{now: now, tokenizer: tokenizerIndex(req.Tokenizer)})
	if err != nil {
		return assembly.Assembled{}, err
	}
	out, kept, err := assembly.Plan(boxID, req, p.candidates)
	if err != nil {
		return assembly.Assembled{}, err
	}
	window, err := s.window(ctx, project, kept, req.Format, at, p.cards)
	if err != nil {
		return assembly.Assembled{}, err
	}
	out.SetWindow(window)
	return out, nil
}

// prepare returns the candidates of box's entries and the moment they
// are current at (at with its stamp): the prepared box kept for box under
// the tokenizer when it is fresh, else made from Postgres and kept.
func (s *Service) prepare(ctx context.Context, q *cardboxdb.Queries, project, box string, at factsAt) (*prepared, factsAt, error) {
	key := preparedKey{project: project, box: box, tokenizer: at.tokenizer}
	if p, ok := s.prepared.Get(key); ok {
		v, err := q.AssemblyBoxVersion(ctx, cardboxdb.AssemblyBoxVersionParams{TenantID: project, BoxID: box})
		if isNoRows(err) {
			s.prepared.Drop(key, p)
			return nil, at, rules.NotFound("box", box)
		}
		if err != nil {
			return nil, at, fmt.Errorf("read version of box %q: %w", box, err)
		}
		at.stamp, at.exists = uint64(v.CardChanges)+1, v.CardChanges >= 0
		if at.exists && p.fresh(v.Version, at.stamp, at.now.UnixMicro()) {
			return p, at, nil
		}
		s.prepared.Drop(key, p)
	}
	row, err := q.AssemblyBox(ctx, cardboxdb.AssemblyBoxParams{TenantID: project, BoxID: box})
	if isNoRows(err) {
		return nil, at, rules.NotFound("box", box)
	}
	if err != nil {
		return nil, at, fmt.Errorf("read entries of box %q: %w", box, err)
	}
	at.stamp, at.exists = uint64(row.CardChanges)+1, row.CardChanges >= 0
	entries, cards, err := s.assemblyEntries(ctx, q, project, row, at)
	if err != nil {
		return nil, at, err
	}
	candidates := candidatesOf(entries, cards)
	if p := newPrepared(row.Version, at, candidates, cards); p != nil {
		s.prepared.Put(key, p)
		return p, at, nil
	}
	return &prepared{candidates: candidates, cards: cards}, at, nil
}

// candidatesOf makes the entries, with their cards' states, candidates
// of the assembly.
func candidatesOf(entries []layout.Entry, cards *assemblyCards) []assembly.Candidate {
	candidates := make([]assembly.Candidate, len(entries))
	for i, e := range entries {
		st := cards.state(e.CardID)
		candidates[i] = assembly.Candidate{Entry: e, Dead: deadReason(e, st)}
		if candidates[i].Dead == "" {
			candidates[i].Item = assembly.Item{Zone: int(e.Zone), Tokens: int(st.fact.Tokens),
				ToolCallIDs: st.fact.ToolCallIDs, ToolCallID: st.fact.ToolCallID}
		}
	}
	return candidates
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

// cardState is what an assembly knows of a card: its facts under the
// request's tokenizer (the zone even when it is not live), and why it is
// not live ("" when it is).
type cardState struct {
	fact cardcache.Fact
	dead string
}

// assemblyCards are the distinct cards of the box being assembled and their
// states.
type assemblyCards struct {
	index  map[string]int // card id → ids and states
	ids    []string
	states []cardState
}

func newAssemblyCards(ids []string) *assemblyCards {
	c := &assemblyCards{index: make(map[string]int, len(ids)), ids: make([]string, 0, len(ids))}
	for _, id := range ids {
		if _, ok := c.index[id]; !ok {
			c.index[id] = len(c.ids)
			c.ids = append(c.ids, id)
		}
	}
	c.states = make([]cardState, len(c.ids))
	return c
}

// state is the state of card id; a zero state for a card not among them
// (a draft's).
func (c *assemblyCards) state(id string) cardState {
	if i, ok := c.index[id]; ok {
		return c.states[i]
	}
	return cardState{}
}

// assemblyEntries returns the box's entries in box order and the states
// of the cards of those that are not drafts.
func (s *Service) assemblyEntries(ctx context.Context, q *cardboxdb.Queries, project string, row cardboxdb.AssemblyBoxRow, at factsAt) ([]layout.Entry, *assemblyCards, error) {
	if row.Structured {
		l := layout.FromRows(row.CardIds, row.EntryIds, row.Zones, row.Positions, row.Drafts, row.EntrySeq)
		ids := make([]string, 0, len(l.Entries))
		for _, e := range l.Entries {
			if !e.Draft {
				ids = append(ids, e.CardID)
			}
		}
		cards := newAssemblyCards(ids)
		return l.Entries, cards, s.cardStates(ctx, q, project, cards, at)
	}
	// A plain box's entries take their zones from their cards' types, which
	// the same lookup gives.
	cards := newAssemblyCards(row.CardIds)
	if err := s.cardStates(ctx, q, project, cards, at); err != nil {
		return nil, nil, err
	}
	l, err := layout.Plain(row.CardIds, func(id string) layout.Zone { return cards.state(id).fact.Zone })
	if err != nil {
		return nil, nil, err
	}
	return l.Entries, cards, nil
}

func deadReason(e layout.Entry, st cardState) string {
	if e.Draft {
		return assembly.LeftOutDraft
	}
	return st.dead
}

// cardStates fills in the state of each of cards: from the facts cache
// for the cards it vouches for at at (with a count under the tokenizer),
// from Postgres for the others, counting the tokens of cards stored
// without a count under the tokenizer (cards written before counts were
// stored). It caches the facts of the live cards it read.
func (s *Service) cardStates(ctx context.Context, q *cardboxdb.Queries, project string, cards *assemblyCards, at factsAt) error {
	var misses []string
	for i, id := range cards.ids {
		if at.exists {
			if f, ok := s.cache.Fact(project, id, at.stamp, at.now, at.tokenizer); ok && f.Tokens >= 0 {
				cards.states[i] = cardState{fact: f}
				continue
			}
		}
		misses = append(misses, id)
	}
	if len(misses) == 0 {
		return nil
	}
	rows, err := q.AssemblyCards(ctx, cardboxdb.AssemblyCardsParams{
		TenantID: project, CardIds: misses, Tokenizers: tokens.Names, Now: at.now,
	})
	if err != nil {
		return fmt.Errorf("read cards to assemble: %w", err)
	}
	facts := make(map[string]*cardcache.Facts, len(rows))
	var uncounted []string
	for _, r := range rows {
		f := factsFromRow(r)
		facts[r.CardID] = &f
		if rowDeadReason(r) == "" && f.Tokens[at.tokenizer] < 0 {
			uncounted = append(uncounted, r.CardID)
		}
	}
	if err := s.countTokens(ctx, project, uncounted, at, facts); err != nil {
		return err
	}
	for _, r := range rows {
		f, dead := facts[r.CardID], rowDeadReason(r)
		cards.states[cards.index[r.CardID]] = cardState{dead: dead, fact: cardcache.Fact{Zone: f.Zone, Tokens: f.Tokens[at.tokenizer],
			ToolCallID: f.ToolCallID, ToolCallIDs: f.ToolCallIDs, Version: r.Version.UnixMicro(), Expires: r.Expires}}
		if at.exists && dead == "" {
			// Read after the counter was: live at the stamp at least.
			s.cache.PutFacts(project, r.CardID, r.Version.UnixMicro(), at.stamp, f, r.Expires)
		}
	}
	return nil
}

// rowDeadReason says why a card AssemblyCards read is not live, or "".
func rowDeadReason(r cardboxdb.AssemblyCardsRow) string {
	switch {
	case !r.Found:
		return assembly.LeftOutMissing
	case r.Deleted:
		return assembly.LeftOutDeleted
	case r.Expired:
		return assembly.LeftOutExpired
	}
	return ""
}

// countTokens counts the tokens of the live cards among ids under the
// tokenizer into their facts.
func (s *Service) countTokens(ctx context.Context, project string, ids []string, at factsAt, facts map[string]*cardcache.Facts) error {
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
		facts[id].Tokens[at.tokenizer] = int32(n)
	}
	return nil
}

// window renders the kept entries' cards as a JSON array, in format.
func (s *Service) window(ctx context.Context, project string, kept []layout.Entry, format string, at factsAt, cards *assemblyCards) (json.RawMessage, error) {
	ids := make([]string, 0, len(kept))
	for _, e := range kept {
		ids = append(ids, e.CardID)
	}
	if format == assembly.FormatMessages {
		return s.messages(ctx, project, ids, at, cards)
	}
	byID, err := s.liveJSONAt(ctx, project, rules.Dedupe(ids), at.now, at.stamp, at.exists)
	if err != nil {
		return nil, err
	}
	items := make([]json.RawMessage, 0, len(ids))
	for _, id := range ids {
		if c, ok := byID[id]; ok { // else deleted since the facts were read
			items = append(items, c)
		}
	}
	return appendjson.RawList(make([]byte, 0, appendjson.RawListLen(items)), items), nil
}

// messages renders cards as chat messages, a JSON array: each from the
// message cache when it holds the card at the version the facts vouched
// for, else from the card's JSON, cached then under the version of that
// JSON (cards are immutable: a card's message never changes).
func (s *Service) messages(ctx context.Context, project string, ids []string, at factsAt, cards *assemblyCards) (json.RawMessage, error) {
	msgs := make([]json.RawMessage, len(ids))
	var render []string
	for i, id := range ids {
		if msgs[i] = s.cache.Message(project, id, cards.state(id).fact.Version); msgs[i] == nil {
			render = append(render, id)
		}
	}
	if len(render) > 0 {
		byID, err := s.liveJSONAt(ctx, project, rules.Dedupe(render), at.now, at.stamp, at.exists)
		if err != nil {
			return nil, err
		}
		for i, id := range ids {
			c, ok := byID[id]
			if msgs[i] != nil || !ok { // cached, or deleted since the facts were read
				continue
			}
			m, version, err := assembly.Message(c)
			if err != nil {
				return nil, err
			}
			s.cache.PutMessage(project, id, version, m)
			msgs[i] = m
		}
	}
	items := slices.DeleteFunc(msgs, func(m json.RawMessage) bool { return m == nil })
	return appendjson.RawList(make([]byte, 0, appendjson.RawListLen(items)), items), nil
}
