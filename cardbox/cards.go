package cardbox

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/cardbox/internal/cardboxdb"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/internal/fault"
)

// AddCards writes up to MaxAddCards cards, all or nothing, and returns them
// as stored, in request order; an id named twice is invalid. A card whose id exists
// with the same content is an idempotent replay: it is left as it is (a
// deleted card stays deleted) and returned as stored. An id that exists
// with different content is a ConflictError, and nothing is written.
func (s *Service) AddCards(ctx context.Context, project string, cards []NewCard) ([]Card, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	norm, err := normalizeAll(cards)
	if err != nil {
		return nil, err
	}
	if err := s.admitWrite(ctx, project, cardBytes(norm)); err != nil {
		return nil, err
	}
	if err := s.admit(ctx, project); err != nil {
		return nil, err
	}
	defer s.gate.Leave()
	var stored map[string]Card
	err = s.inTx(ctx, project, func(q *cardboxdb.Queries) error {
		stored, err = insertCards(ctx, q, project, s.now(), norm)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Card, len(norm))
	for i, n := range norm {
		out[i] = stored[n.ID]
	}
	return out, nil
}

// normalizeAll validates a batch and generates missing ids; an id named
// twice is invalid, whatever the content.
func normalizeAll(cards []NewCard) ([]normalCard, error) {
	if len(cards) == 0 {
		return nil, rules.Invalid("cards", "at least one card is required")
	}
	if len(cards) > rules.MaxAddCards {
		return nil, rules.Invalid("cards", "at most %d cards per request, got %d", rules.MaxAddCards, len(cards))
	}
	out := make([]normalCard, 0, len(cards))
	seen := make(map[string]int, len(cards))
	for i, c := range cards {
		if c.CardID == "" {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, fmt.Errorf("generate card id: %w", err)
			}
			c.CardID = id.String()
		}
		n, err := normalize(c)
		if err != nil {
			return nil, rules.Within(fmt.Sprintf("cards[%d]", i), err)
		}
		if j, ok := seen[n.ID]; ok {
			return nil, rules.Invalid(fmt.Sprintf("cards[%d].card_id", i), "%q is named twice in this request (first at cards[%d])", n.ID, j)
		}
		seen[n.ID] = i
		out = append(out, n)
	}
	return out, nil
}

// maxPurgeRaces bounds the passes insertCards makes over ids it found
// taken whose rows were purged before it could compare them.
const maxPurgeRaces = 3

// insertCards inserts the new cards and checks that the others are exact
// replays; it returns every card as stored, by id. An id found taken whose
// row the sweeper purged before the check (an expired or long-deleted
// card) is free again: it is inserted in another pass, so that the write
// succeeds. After maxPurgeRaces such passes the write is refused as
// unavailable (503 with Retry-After), never as a fault of the server.
func insertCards(ctx context.Context, q *cardboxdb.Queries, project string, now time.Time, norm []normalCard) (map[string]Card, error) {
	stored := make(map[string]Card, len(norm))
	todo := norm
	for pass := 1; ; pass++ {
		p, err := insertParams(project, now, todo)
		if err != nil {
			return nil, err
		}
		rows, err := q.InsertCards(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("insert cards: %w", err)
		}
		for _, r := range rows {
			stored[r.CardID] = cardFromRow(cardboxdb.GetLiveCardsRow(r))
		}
		rest := make([]normalCard, 0, len(todo))
		for _, n := range todo {
			if _, ok := stored[n.ID]; !ok {
				rest = append(rest, n)
			}
		}
		if len(rest) == 0 {
			return stored, nil
		}
		if err := checkReplays(ctx, q, project, rest, stored); err != nil {
			return stored, err
		}
		todo = todo[:0:0]
		for _, n := range rest {
			if _, ok := stored[n.ID]; !ok {
				todo = append(todo, n) // purged between the insert and the check
			}
		}
		if len(todo) == 0 {
			return stored, nil
		}
		if pass == maxPurgeRaces {
			return stored, fault.New(fault.Unavailable,
				"add cards: %d existing cards were purged by the sweeper while they were written, %d times; retry", len(todo), pass)
		}
	}
}

// insertParams makes the insert of cards: their columns, content hashes
// and token counts.
func insertParams(project string, now time.Time, norm []normalCard) (cardboxdb.InsertCardsParams, error) {
	p := cardboxdb.InsertCardsParams{TenantID: project, Now: now}
	fillColumns(norm, &p.CardIds, &p.Contents, &p.ToolCalls, &p.ToolCallIds, &p.TtlSeconds, &p.Metadatas)
	for _, n := range norm {
		h, err := rules.ContentHash(n.Content)
		if err != nil {
			return p, fmt.Errorf("hash card %q: %w", n.ID, err)
		}
		counts, err := tokenCounts(n.Content, n.ToolCalls)
		if err != nil {
			return p, fmt.Errorf("count tokens of card %q: %w", n.ID, err)
		}
		p.ContentHashes = append(p.ContentHashes, h)
		p.TokenCounts = append(p.TokenCounts, counts)
		p.CxdbContextIds = append(p.CxdbContextIds, int64(n.cxdbContext))
		p.CxdbTurnIds = append(p.CxdbTurnIds, int64(n.cxdbTurn))
	}
	return p, nil
}

// checkReplays compares cards that already exist with the stored ones and
// adds them to stored; any difference is a ConflictError. A card whose
// row is gone (purged since the insert skipped it) is left out of stored.
func checkReplays(ctx context.Context, q *cardboxdb.Queries, project string, rest []normalCard, stored map[string]Card) error {
	p := cardboxdb.CompareCardsParams{TenantID: project}
	fillColumns(rest, &p.CardIds, &p.Contents, &p.ToolCalls, &p.ToolCallIds, &p.TtlSeconds, &p.Metadatas)
	rows, err := q.CompareCards(ctx, p)
	if err != nil {
		return fmt.Errorf("compare cards: %w", err)
	}
	var conflicts []string
	for _, r := range rows {
		if !r.Same {
			conflicts = append(conflicts, r.CardID)
			continue
		}
		c := cardFromRow(cardboxdb.GetLiveCardsRow{
			TenantID: r.TenantID, CardID: r.CardID, Content: r.Content, ToolCalls: r.ToolCalls,
			ToolCallID: r.ToolCallID, TtlSeconds: r.TtlSeconds, ExpiresAt: r.ExpiresAt,
			DeletedAt: r.DeletedAt, Metadata: r.Metadata, CreatedAt: r.CreatedAt,
			Type: r.Type, Role: r.Role, AuthorID: r.AuthorID,
		})
		stored[c.CardID] = c
	}
	if len(conflicts) > 0 {
		return &rules.ConflictError{CardIDs: conflicts}
	}
	return nil
}

// fillColumns turns cards into the column arrays of a batch statement.
func fillColumns(cards []normalCard, ids *[]string, contents, toolCalls *[][]byte, toolCallIDs *[]string, ttls *[]int32, metas *[][]byte) {
	for _, n := range cards {
		*ids = append(*ids, n.ID)
		*contents = append(*contents, n.Content)
		*toolCalls = append(*toolCalls, n.ToolCalls)
		*toolCallIDs = append(*toolCallIDs, n.ToolCallID)
		*ttls = append(*ttls, n.TTL)
		*metas = append(*metas, n.Metadata)
	}
}

// DeleteCard soft-deletes a card: reads stop returning it at once and the
// sweeper purges it after the retention period. Deleting a deleted card is
// a no-op; an absent one is ErrNotFound.
func (s *Service) DeleteCard(ctx context.Context, project, cardID string) error {
	if err := checkProject(project); err != nil {
		return err
	}
	if err := rules.ValidateID("card_id", cardID); err != nil {
		return err
	}
	n, err := s.as(project).SoftDeleteCard(ctx, cardboxdb.SoftDeleteCardParams{TenantID: project, CardID: cardID, Now: s.now()})
	if err != nil {
		return fmt.Errorf("delete card %q: %w", cardID, err)
	}
	if n == 0 {
		return rules.NotFound("card", cardID)
	}
	return nil
}

// cardFromRow converts a stored row.
func cardFromRow(r cardboxdb.GetLiveCardsRow) Card {
	return Card{
		ProjectID:  r.TenantID,
		CardID:     r.CardID,
		Content:    r.Content,
		ToolCalls:  r.ToolCalls,
		ToolCallID: r.ToolCallID.String,
		TTLSeconds: int(r.TtlSeconds.Int32),
		Metadata:   r.Metadata,
		Type:       r.Type,
		Role:       r.Role,
		AuthorID:   r.AuthorID,
		CreatedAt:  r.CreatedAt,
		ExpiresAt:  timePtr(r.ExpiresAt),
		DeletedAt:  timePtr(r.DeletedAt),
	}
}

func timePtr(t pgtype.Timestamptz) *time.Time {
	if !t.Valid {
		return nil
	}
	return &t.Time
}
