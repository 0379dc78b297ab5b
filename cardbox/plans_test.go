package cardbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// statements records the statements a pool runs (in batches, as pgrole
// sends them), so that a test can EXPLAIN exactly what the service asked.
type statements struct {
	mu   sync.Mutex
	seen map[string][]any // by the sqlc query name
}

func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (s *statements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	name, ok := strings.CutPrefix(d.SQL, "-- name: ")
	if !ok {
		return
	}
	name, _, _ = strings.Cut(name, " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[name] = append([]any{d.SQL}, d.Args...)
}

func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The batch reads look cards and boxes up by index probes, one per id,
// whatever the statistics say: here there are none (autovacuum is off and
// nothing was analyzed) after a bulk load of one large project beside
// small ones, which is where Postgres used to hash the whole project.
func TestBatchReadPlansDoNotDependOnStatistics(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDB(t)
	rec := &statements{seen: map[string][]any{}}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, "ALTER TABLE cards SET (autovacuum_enabled = false); ALTER TABLE boxes SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	svc := cardbox.New(pool, cardbox.Options{CardCacheBytes: -1})
	ids := bulkLoad(t, svc)
	if _, err := svc.GetCardsJSONWithin(ctx, "big", ids[:100], unlimited); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SaveBox(ctx, "big", "b1", cardbox.BoxInput{CardIDs: ids[:100]}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.GetBoxesJSONWithin(ctx, "big", cardbox.BoxesQuery{BoxIDs: []string{"b1", "nope"}}, unlimited); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"GetLiveCards", "MissingCardIDs", "GetLiveBoxes"} {
		q, ok := rec.seen[name]
		if !ok {
			t.Errorf("%s was not run", name)
			continue
		}
		var plan string
		err := pgrole.As(pool, pgrole.Tenant, "big").QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+q[0].(string), q[1:]...).Scan(&plan)
		if err != nil {
			t.Fatalf("explain %s: %v", name, err)
		}
		if bad := scansOfAll(t, plan); bad != "" {
			t.Errorf("%s: %s\n%s", name, bad, plan)
		}
	}
}

// bulkLoad writes 5,000 cards to project "big" and one to each of 50
// small projects, and returns the big project's ids.
func bulkLoad(t *testing.T, svc *cardbox.Service) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for batch := range 50 {
		in := make([]cardbox.NewCard, 100)
		for i := range in {
			id := fmt.Sprintf("c%d-%d", batch, i)
			in[i] = cardbox.NewCard{CardID: id, Content: json.RawMessage(`"text"`), Metadata: json.RawMessage(`{"type":"app.note","role":"user"}`)}
			ids = append(ids, id)
		}
		if _, err := svc.AddCards(ctx, "big", in); err != nil {
			t.Fatal(err)
		}
		small := []cardbox.NewCard{{CardID: "only", Content: json.RawMessage(`"x"`), Metadata: json.RawMessage(`{"type":"app.note","role":"user"}`)}}
		if _, err := svc.AddCards(ctx, fmt.Sprintf("small-%d", batch), small); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// scansOfAll describes the first node of an EXPLAIN (FORMAT JSON) plan
// that reads a whole project or table (a sequential or bitmap scan of
// cards or boxes, or a hash join that would build on one), or "".
func scansOfAll(t *testing.T, plan string) string {
	t.Helper()
	var root []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(plan), &root); err != nil || len(root) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	return root[0].Plan.wholeScan()
}

type planNode struct {
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Plans    []planNode `json:"Plans"`
}

func (n planNode) wholeScan() string {
	table := n.Relation == "cards" || n.Relation == "boxes"
	switch {
	case table && n.NodeType != "Index Scan" && n.NodeType != "Index Only Scan":
		return n.NodeType + " on " + n.Relation
	case strings.HasPrefix(n.NodeType, "Hash") || n.NodeType == "Merge Join":
		return n.NodeType
	}
	for _, c := range n.Plans {
		if bad := c.wholeScan(); bad != "" {
			return bad
		}
	}
	return ""
}
