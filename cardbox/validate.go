package cardbox

import "github.com/cardboxhq/cardbox/cardbox/rules"

// normalCard is a NewCard validated and normalized for storage and for
// comparison with a stored card.
type normalCard struct {
	rules.StoredCard
	// cxdbContext and cxdbTurn name the CXDB turn a derived card was
	// made from; 0 for other cards.
	cxdbContext, cxdbTurn uint64
}

// normalize validates c and returns its stored form.
func normalize(c NewCard) (normalCard, error) {
	n, err := rules.NormalizeCard(c.CardID, c.Content, c.ToolCalls, c.ToolCallID, c.TTLSeconds, c.Metadata)
	return normalCard{StoredCard: n}, err
}
