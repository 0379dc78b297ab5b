package cardbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cardboxhq/cardbox/cardbox/internal/cardboxdb"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/cardbox/tokens"
)

// MaxSameContent is how many cards a lookup by content hash returns.
const MaxSameContent = 100

// tokenCounts returns a card's token count under every known tokenizer,
// as the JSON object stored with the card.
func tokenCounts(content, toolCalls []byte) ([]byte, error) {
	all, err := tokens.CountAll(rules.CardText(content, toolCalls))
	if err != nil {
		return nil, err
	}
	counts := make(map[string]int, len(tokens.Names))
	for i, name := range tokens.Names {
		counts[name] = all[i]
	}
	return json.Marshal(counts)
}

// CardsWithContentHash returns the project's live cards whose content
// hashes to hash (hex), oldest first, at most MaxSameContent.
func (s *Service) CardsWithContentHash(ctx context.Context, project, hash string) ([]json.RawMessage, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	h, err := rules.ParseContentHash(hash)
	if err != nil {
		return nil, err
	}
	ids, err := s.as(project).CardIDsByContentHash(ctx, cardboxdb.CardIDsByContentHashParams{
		TenantID: project, ContentHash: h, Now: s.now(), MaxCards: MaxSameContent,
	})
	if err != nil {
		return nil, fmt.Errorf("find cards by content hash: %w", err)
	}
	byID, err := s.liveJSON(ctx, project, ids)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, len(ids))
	for _, id := range ids {
		if c, ok := byID[id]; ok {
			out = append(out, c)
		}
	}
	return out, nil
}
