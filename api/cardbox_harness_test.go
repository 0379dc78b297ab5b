package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/internal/membudget"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testBodyLimit is the body limit of test servers.
const testBodyLimit = 64 << 10

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// harness is a CardBox server on a fresh database.
type harness struct {
	t   testing.TB
	url string
	svc *cardbox.Service
	clk *clock
	h   *api.Handler
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessOn(t, pgtest.NewPool(t), testBodyLimit)
}

// newHarnessOn is a CardBox server over pool with a body limit.
func newHarnessOn(t testing.TB, pool cardbox.DB, bodyLimit int64) *harness {
	t.Helper()
	return newHarnessWith(t, pool, bodyLimit, cardbox.Options{})
}

// newHarnessWith is newHarnessOn with the service's options (its clock is
// the harness's).
func newHarnessWith(t testing.TB, pool cardbox.DB, bodyLimit int64, opts cardbox.Options) *harness {
	t.Helper()
	return newHarnessRoutes(t, pool, bodyLimit, opts, api.CardBoxOptions{})
}

// newBudgetHarness is a CardBox server on a fresh database, with the body
// limit of cardboxd, whose card reads are charged to answers and wait at
// most wait for room in it.
func newBudgetHarness(t testing.TB, answers *membudget.Budget, wait time.Duration) *harness {
	t.Helper()
	return newHarnessRoutes(t, pgtest.NewPool(t), 8<<20, cardbox.Options{}, api.CardBoxOptions{Answers: answers, AnswerWait: wait})
}

// newHarnessRoutes is newHarnessWith with the routes' options.
func newHarnessRoutes(t testing.TB, pool cardbox.DB, bodyLimit int64, opts cardbox.Options, routes api.CardBoxOptions) *harness {
	t.Helper()
	clk := &clock{t: time.Now().UTC().Truncate(time.Second)}
	opts.Now = clk.Now
	svc := cardbox.New(pool, opts)
	h := api.New(api.Options{Routes: []api.Routes{api.CardBoxWith(svc, routes), api.Assembly(svc, nil)}, BodyLimit: bodyLimit})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &harness{t: t, url: srv.URL, svc: svc, clk: clk, h: h}
}

// response is a decoded HTTP answer.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// apiError decodes an error body.
func (r response) apiError(t testing.TB) api.Error {
	t.Helper()
	var body struct{ Error api.Error }
	r.JSON(t, &body)
	return body.Error
}

// do sends a request (body: nil, a string sent as is, or a value encoded
// as JSON) and checks the answer against the OpenAPI document.
func (h *harness) do(method, path string, body any) response {
	h.t.Helper()
	r, err := h.try(method, path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// try is do for goroutines other than the test's: it returns what went
// wrong (a failed request, an answer of another status than want when
// want is not 0, one that does not match the OpenAPI document) instead of
// failing the test.
func (h *harness) try(method, path string, body any, want ...int) (response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return response{}, err
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		return response{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	r := response{Status: res.StatusCode, Header: res.Header, Body: out}
	if err := spec(h.t).checkResponse(method, req.URL.EscapedPath(), r); err != nil {
		return r, fmt.Errorf("%s %s: answer does not match docs/openapi.yaml: %v\n%s", method, path, err, out)
	}
	if len(want) > 0 && r.Status != want[0] {
		return r, fmt.Errorf("%s %s: status %d, want %d: %s", method, path, r.Status, want[0], out)
	}
	return r, nil
}

// want fails the test unless r has status.
func (r response) want(t testing.TB, status int) response {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	return r
}

// card is a card body for writes.
func card(id, typ, content string) map[string]any {
	c := map[string]any{"content": content, "metadata": map[string]any{"type": typ}}
	if id != "" {
		c["card_id"] = id
	}
	return c
}

// addCards writes cards to project and fails the test on error.
func (h *harness) addCards(project string, cards ...map[string]any) []map[string]any {
	h.t.Helper()
	var out struct{ Cards []map[string]any }
	h.do("POST", "/projects/"+project+"/cards", map[string]any{"cards": cards}).want(h.t, 201).JSON(h.t, &out)
	return out.Cards
}

// notes writes n task.instruction cards named prefix0..prefixN-1.
func (h *harness) notes(project, prefix string, n int) []string {
	h.t.Helper()
	var ids []string
	for start := 0; start < n; start += cardbox.MaxAddCards {
		var batch []map[string]any
		for i := start; i < min(n, start+cardbox.MaxAddCards); i++ {
			id := fmt.Sprintf("%s%d", prefix, i)
			ids = append(ids, id)
			batch = append(batch, card(id, "task.instruction", "note "+id))
		}
		h.addCards(project, batch...)
	}
	return ids
}

// ids returns the card_id of each card.
func ids(cards []map[string]any) []string {
	out := make([]string, len(cards))
	for i, c := range cards {
		out[i], _ = c["card_id"].(string)
	}
	return out
}
