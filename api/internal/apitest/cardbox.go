package apitest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/cardboxhttp"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/membudget"
	"github.com/cardboxhq/cardbox/internal/testkit"
)

// BodyLimit is the body limit of test servers.
const BodyLimit = 64 << 10

// CardBox is a CardBox API client of a running cardbox: the daemon
// cardboxd runs, whose CardBox service reads the harness's clock.
type CardBox struct {
	T   testing.TB
	URL string
	Svc *cardbox.Service
	// Clk is the CardBox service's clock; nil when the server reads
	// the real time (CardBoxOf).
	Clk *testkit.Clock
	H   *api.Handler
}

// CardBoxOptions vary a CardBox server; the zero value is cardboxd's
// configuration with the test body limit.
type CardBoxOptions struct {
	// Pool is the database (one a test prepared); a fresh one when nil.
	Pool *pgxpool.Pool
	// BodyLimit is the HTTP body limit; BodyLimit when 0.
	BodyLimit int64
	// CardCacheBytes is the card cache's size (daemon.Config's).
	CardCacheBytes int64
	// Answers and AnswerWait: the answer budget of the routes, instead of
	// the one they share with the binary port, and how long a read waits
	// for room in it.
	Answers    *membudget.Budget
	AnswerWait time.Duration
}

// NewCardBox starts a CardBox server on a fresh database.
func NewCardBox(t testing.TB) *CardBox {
	t.Helper()
	return NewCardBoxWith(t, CardBoxOptions{})
}

// NewCardBoxWith starts a whole server as o says, its CardBox service on
// a clock of the harness's that starts at the current second.
func NewCardBoxWith(t testing.TB, o CardBoxOptions) *CardBox {
	t.Helper()
	clk := testkit.NewClock(time.Now().UTC().Truncate(time.Second))
	cfg := daemontest.Config(t)
	cfg.Pool = o.Pool
	cfg.HTTPBodyLimit = cmp.Or(o.BodyLimit, BodyLimit)
	if o.CardCacheBytes != 0 {
		cfg.CardCacheBytes = o.CardCacheBytes
	}
	// A minute to answer (api.DefaultDeadlines.Write) rather than
	// cardboxd's 30 s: under the race detector on a busy machine, a write
	// of a card of megabytes can take longer.
	cfg.WriteTimeout = api.DefaultDeadlines.Write
	cfg.Test.Now, cfg.Test.Answers, cfg.Test.AnswerWait = clk.Now, o.Answers, o.AnswerWait
	d := daemontest.Start(t, cfg)
	return &CardBox{T: t, URL: "http://" + d.HTTPAddr(), Svc: d.CardBox(), Clk: clk, H: d.Handler()}
}

// NewBudgetCardBox is a CardBox server on a fresh database, with the body
// limit of cardboxd, whose card reads are charged to answers and wait at
// most wait for room in it.
func NewBudgetCardBox(t testing.TB, answers *membudget.Budget, wait time.Duration) *CardBox {
	t.Helper()
	return NewCardBoxWith(t, CardBoxOptions{BodyLimit: daemon.Defaults().HTTPBodyLimit, Answers: answers, AnswerWait: wait})
}

// CardBoxOf is a CardBox API client of the server h runs.
func CardBoxOf(h *CXDB) *CardBox {
	return &CardBox{T: h.T, URL: h.URL, Svc: h.cards, H: h.handler}
}

// NewCardBoxRoutesOnly serves the CardBox routes alone over db, with no
// server around them: for a test of the routes when no server could
// start (its Postgres unreachable).
func NewCardBoxRoutesOnly(t testing.TB, db cardbox.DB) *CardBox {
	t.Helper()
	svc := cardbox.New(db, cardbox.Options{})
	h := api.New(api.Options{Routes: []api.Routes{cardboxhttp.New(svc), cardboxhttp.Assembly(svc, nil)}, BodyLimit: BodyLimit})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &CardBox{T: t, URL: srv.URL, Svc: svc, H: h}
}

// Response is a decoded HTTP answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// APIError decodes an error body.
func (r Response) APIError(t testing.TB) api.Error {
	t.Helper()
	var body struct{ Error api.Error }
	r.JSON(t, &body)
	return body.Error
}

// Do sends a request (body: nil, a string sent as is, or a value encoded
// as JSON) and checks the answer against the OpenAPI document.
func (h *CardBox) Do(method, path string, body any) Response {
	h.T.Helper()
	r, err := h.Try(method, path, body)
	if err != nil {
		h.T.Fatal(err)
	}
	return r
}

// Try is do for goroutines other than the test's: it returns what went
// wrong (a failed request, an answer of another status than want when
// want is not 0, one that does not match the OpenAPI document) instead of
// failing the test.
func (h *CardBox) Try(method, path string, body any, want ...int) (Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return Response{}, err
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, h.URL+path, rd)
	if err != nil {
		return Response{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		return Response{}, err
	}
	r := Response{Status: res.StatusCode, Header: res.Header, Body: out}
	if err := Spec(h.T).CheckResponse(method, req.URL.EscapedPath(), r); err != nil {
		return r, fmt.Errorf("%s %s: answer does not match docs/openapi.yaml: %v\n%s", method, path, err, out)
	}
	if len(want) > 0 && r.Status != want[0] {
		return r, fmt.Errorf("%s %s: status %d, want %d: %s", method, path, r.Status, want[0], out)
	}
	return r, nil
}

// Want fails the test unless r has status.
func (r Response) Want(t testing.TB, status int) Response {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	return r
}

// Card is a card body for writes.
func Card(id, typ, content string) map[string]any {
	c := map[string]any{"content": content, "metadata": map[string]any{"type": typ}}
	if id != "" {
		c["card_id"] = id
	}
	return c
}

// AddCards writes cards to project and fails the test on error.
func (h *CardBox) AddCards(project string, cards ...map[string]any) []map[string]any {
	h.T.Helper()
	var out struct{ Cards []map[string]any }
	h.Do("POST", "/projects/"+project+"/cards", map[string]any{"cards": cards}).Want(h.T, 201).JSON(h.T, &out)
	return out.Cards
}

// Notes writes n task.instruction cards named prefix0..prefixN-1.
func (h *CardBox) Notes(project, prefix string, n int) []string {
	h.T.Helper()
	var ids []string
	for start := 0; start < n; start += rules.MaxAddCards {
		var batch []map[string]any
		for i := start; i < min(n, start+rules.MaxAddCards); i++ {
			id := fmt.Sprintf("%s%d", prefix, i)
			ids = append(ids, id)
			batch = append(batch, Card(id, "task.instruction", "note "+id))
		}
		h.AddCards(project, batch...)
	}
	return ids
}

// IDs returns the card_id of each card.
func IDs(cards []map[string]any) []string {
	out := make([]string, len(cards))
	for i, c := range cards {
		out[i], _ = c["card_id"].(string)
	}
	return out
}
