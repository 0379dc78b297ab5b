package cardbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cardboxhq/cardbox/cardbox/assembly"
	"github.com/cardboxhq/cardbox/cardbox/cardcache"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/cardbox/tokens"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// Assemble builds a box's context window within a token budget (see
// package assembly for the rule). The same box state, budget, tokenizer
// and format give the same bytes.
//
// It costs one query when the card and facts caches hold the box's cards
// (the box with the project's change counter), and one more for the cards
// they cannot vouch for (see facts.go).
func (s *Service) Assemble(ctx context.Context, project, boxID string, req assembly.Request) (assembly.Assembled, error) {
	if err := req.Check(); err != nil {
		return assembly.Assembled{}, err
	}
	if err := checkBoxID(project, boxID); err != nil {
		return assembly.Assembled{}, err
	}
	now := s.now()
	q := s.as(project)
	row, err := q.AssemblyBox(ctx, db.AssemblyBoxParams{TenantID: project, BoxID: boxID})
	if isNoRows(err) {
		return assembly.Assembled{}, rules.NotFound("box", boxID)
	}
	if err != nil {
		return assembly.Assembled{}, fmt.Errorf("read entries of box %q: %w", boxID, err)
	}
	at := factsAt{now: now, stamp: uint64(row.CardChanges) + 1, exists: row.CardChanges >= 0, tokenizer: tokenizerIndex(req.Tokenizer)}
	entries, states, err := s.assemblyEntries(ctx, q, project, row, at)
	if err != nil {
		return assembly.Assembled{}, err
	}
	candidates := make([]assembly.Candidate, len(entries))
	for i, e := range entries {
		st := states[e.CardID]
		candidates[i] = assembly.Candidate{Entry: e, Dead: deadReason(e, st)}
		if candidates[i].Dead == "" {
			candidates[i].Item = assembly.Item{Zone: int(e.Zone), Tokens: int(st.facts.Tokens[at.tokenizer]),
				ToolCallIDs: st.facts.ToolCallIDs, ToolCallID: st.facts.ToolCallID}
		}
	}
	out, kept, err := assembly.Plan(boxID, req, candidates)
	if err != nil {
		return assembly.Assembled{}, err
	}
	window, err := s.window(ctx, project, kept, req.Format, at)
	if err != nil {
		return assembly.Assembled{}, err
	}
	out.SetWindow(window)
	return out, nil
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
	facts cardcache.Facts
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
		zones[id] = st.facts.Zone
	}
	l, err := layout.Plain(row.CardIds, zones)
	if err != nil {
		return nil, nil, err
	}
	return l.Entries, states, nil
}

func deadReason(e layout.Entry, st cardState) string {
	if e.Draft {
		return assembly.LeftOutDraft
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
			if f, _, ok := s.cache.Facts(project, id, at.stamp, at.now); ok && f.Tokens[at.tokenizer] >= 0 {
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
		if st.dead == "" && st.facts.Tokens[at.tokenizer] < 0 {
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
				s.cache.PutFacts(project, r.CardID, r.Version.UnixMicro(), at.stamp, &st.facts, r.Expires)
			}
		}
	}
	return states, nil
}

// rowDeadReason says why a card AssemblyCards read is not live, or "".
func rowDeadReason(r db.AssemblyCardsRow) string {
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
		st.facts.Tokens[at.tokenizer] = int32(n)
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
		if format == assembly.FormatCards {
			b.Write(c)
			continue
		}
		m, err := assembly.Message(c)
		if err != nil {
			return nil, err
		}
		b.Write(m)
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}
