package cardbox

import (
	"github.com/cardboxhq/cardbox/cardbox/cardcache"
	"github.com/cardboxhq/cardbox/cardbox/internal/cardboxdb"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/tokens"
)

// Assembly reads what it needs of a box's cards (their default zone, tool
// call ids and token counts) from the facts cache, beside the card cache
// and trusted the same way (see liveJSON): an entry stamped with the
// project's current change counter, not expired, is a live card whose
// facts are current, since cards are immutable. Only the cards the cache
// cannot vouch for are asked of Postgres (AssemblyCards), which also says
// why a card is not live.

// tokenizerIndex returns the index of a known tokenizer in tokens.Names.
func tokenizerIndex(name string) int {
	for i, n := range tokens.Names {
		if n == name {
			return i
		}
	}
	return -1
}

// factsFromRow reads the facts of a card AssemblyCards found.
func factsFromRow(r cardboxdb.AssemblyCardsRow) cardcache.Facts {
	f := cardcache.Facts{Zone: layout.DefaultZone(r.Type), ToolCallID: r.ToolCallID, ToolCallIDs: r.ToolCallIds,
		Tokens: make([]int32, len(tokens.Names))}
	for i := range f.Tokens {
		f.Tokens[i] = -1
		if i < len(r.Tokens) {
			f.Tokens[i] = r.Tokens[i]
		}
	}
	return f
}
