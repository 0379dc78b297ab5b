package cxdbhttp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// The bounds of HTTP answers (docs/cxdb-http.md, "Answer bounds"): a turn
// page holds at most service.MaxPageBytes of turns, a typed rendering is
// bounded in the work it does, and large answers are charged to the
// binary port's answer budget.

// binPayload is a msgpack map {1: bin of n bytes of fill}: a payload of n
// bytes and 8 more.
func binPayload(n int, fill byte) []byte {
	b := []byte{0x81, 0x01, 0xc6, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[3:], uint32(n))
	return append(b, bytes.Repeat([]byte{fill}, n)...)
}

// emptyMapsPayload is a msgpack map {1: "hello", 99: n empty maps}: ten
// million maps fit in 10 MB.
func emptyMapsPayload(n int) []byte {
	b := []byte{0x82, 0x01, 0xa5, 'h', 'e', 'l', 'l', 'o', 99, 0xdd, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[10:], uint32(n))
	return append(b, bytes.Repeat([]byte{0x80}, n)...)
}

// appendTyped appends payload as a turn of typeID version 1.
func appendTyped(t testing.TB, c *client.Client, ctxID uint64, typeID string, payload []byte) uint64 {
	t.Helper()
	res, err := c.AppendTurn(context.Background(), &client.AppendRequest{ContextID: ctxID, TypeID: typeID, TypeVersion: 1, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	return res.NewTurnID
}

// newContext creates a context over the binary protocol.
func newContext(t testing.TB, c *client.Client) uint64 {
	t.Helper()
	head, err := c.CreateContext(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return head.ContextID
}

// boundsBundle registers test.Blob (field 1, bytes) and test.Maps (field
// 1, a string).
const boundsBundle = `{"registry_version":1,"bundle_id":"bounds","types":{
	"test.Blob":{"versions":{"1":{"fields":{"1":{"name":"data","type":"bytes"}}}}},
	"test.Maps":{"versions":{"1":{"fields":{"1":{"name":"text","type":"string"}}}}}}}`

// measured is what the process allocated while a request ran, and by how
// much its heap in use grew. The server runs in this process; the
// client reads the body into a buffer allocated before.
type measured struct {
	alloc, inuse int64
	took         time.Duration
}

func (m measured) String() string {
	return fmt.Sprintf("%v, %.1f MiB allocated, heap in use %+.1f MiB", m.took.Round(time.Millisecond), float64(m.alloc)/(1<<20), float64(m.inuse)/(1<<20))
}

// maxRequestAlloc is what one request may allocate, server and client
// together.
const maxRequestAlloc = 100 << 20

// getMeasured GETs path, reading the body into buf, and measures the
// process's allocations while it does.
func getMeasured(t testing.TB, h *apitest.CXDB, path string, buf []byte) (apitest.Response, measured) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	res, err := http.Get(h.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.ReadFull(res.Body, buf)
	res.Body.Close()
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	switch {
	case err == nil:
		t.Fatalf("GET %s: the answer is larger than %d bytes", path, len(buf))
	case !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF):
		t.Fatalf("GET %s: %v", path, err)
	}
	m := measured{alloc: int64(after.TotalAlloc - before.TotalAlloc), inuse: int64(after.HeapInuse) - int64(before.HeapInuse), took: took}
	return apitest.Response{Status: res.StatusCode, Header: res.Header, Body: buf[:n]}, m
}

// getPage GETs a turn page.
func getPage(t testing.TB, h *apitest.CXDB, path string) rawPage {
	t.Helper()
	res, err := http.Get(h.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return decodePage(t, apitest.Response{Status: res.StatusCode, Body: body})
}

// rawPage is a turn page of the raw view.
type rawPage struct {
	Turns []struct {
		TurnID      string         `json:"turn_id"`
		Error       map[string]any `json:"error"`
		ContentHash string         `json:"content_hash_b3"`
		BytesB64    *string        `json:"bytes_b64"`
		BytesHex    *string        `json:"bytes_hex"`
	} `json:"turns"`
	NextBeforeTurnID *string `json:"next_before_turn_id"`
	NextCursor       string  `json:"next_cursor"`
	PrevCursor       string  `json:"prev_cursor"`
}

func decodePage(t testing.TB, r apitest.Response) rawPage {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %.300s", r.Status, r.Body)
	}
	var p rawPage
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("page: %v", err)
	}
	return p
}

// scanPage reads a page's cursors and turn ids without decoding its turns
// (pages of tens of MB decode slowly under the race detector): the turns
// come last, and a turn id cannot occur in base64 or hex.
func scanPage(t testing.TB, r apitest.Response) (rawPage, []uint64) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %.300s", r.Status, r.Body)
	}
	i := bytes.Index(r.Body, []byte(`,"turns":[`))
	var p rawPage
	if i < 0 || json.Unmarshal(append(r.Body[:i:i], '}'), &p) != nil {
		t.Fatalf("not a page: %.300s", r.Body)
	}
	var ids []uint64
	key := []byte(`{"turn_id":"`)
	for rest := r.Body[i:]; ; {
		j := bytes.Index(rest, key)
		if j < 0 {
			return p, ids
		}
		rest = rest[j+len(key):]
		end := bytes.IndexByte(rest, '"')
		id, err := strconv.ParseUint(string(rest[:end]), 10, 64)
		if err != nil {
			t.Fatalf("turn id %q: %v", rest[:end], err)
		}
		ids = append(ids, id)
	}
}

// ids are the page's turn ids, oldest first; each turn's bytes must be
// payload.
func (p rawPage) ids(t testing.TB, payload []byte, hexBytes bool) []uint64 {
	t.Helper()
	var out []uint64
	for _, turn := range p.Turns {
		id, err := strconv.ParseUint(turn.TurnID, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		switch {
		case hexBytes && turn.BytesHex != nil:
			got, err = hex.DecodeString(*turn.BytesHex)
		case !hexBytes && turn.BytesB64 != nil:
			got, err = base64.StdEncoding.DecodeString(*turn.BytesB64)
		default:
			t.Fatalf("turn %d has no bytes: error %v", id, turn.Error)
		}
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("turn %d: bytes differ from the payload (%d bytes, %v)", id, len(got), err)
		}
		out = append(out, id)
	}
	return out
}

// sameIDs fails unless got is want, each turn once.
func sameIDs(t testing.TB, how string, got, want []uint64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: turns %v, want %v (each once, oldest first)", how, got, want)
	}
}

// TestRawPagesOfASharedLargePayloadStopAtTheBound is the reported case:
// 30 turns sharing one 10 MB payload (stored once), asked for 30 at a
// time in the raw view, built a 400 MB answer (600 MB as hex) and took
// the server from 92 to 1,474 MiB. A page now stops before the turn that
// would pass the bound, and its cursors reach every turn exactly once.
func TestRawPagesOfASharedLargePayloadStopAtTheBound(t *testing.T) {
	h := apitest.NewCXDB(t)
	c := h.Client()
	payload := binPayload(10_000_000, 'x')
	ctxID := newContext(t, c)
	var all []uint64
	for range 30 {
		all = append(all, appendTyped(t, c, ctxID, "test.Blob", payload))
	}
	buf := make([]byte, service.MaxPageBytes+1<<20)
	turns := fmt.Sprintf("/v1/contexts/%d/turns?limit=30&view=raw", ctxID)

	for _, tc := range []struct {
		render  string
		hex     bool
		perTurn int // the payload as base64 or hex, a turn's bulk
	}{
		{"base64", false, base64.StdEncoding.EncodedLen(len(payload))},
		{"hex", true, hex.EncodedLen(len(payload))},
	} {
		t.Run(tc.render, func(t *testing.T) {
			path := turns + "&bytes_render=" + tc.render
			r, m := getMeasured(t, h, path, buf)
			t.Logf("first page, bytes_render=%s: %d bytes, %v", tc.render, len(r.Body), m)
			if m.alloc > maxRequestAlloc {
				t.Errorf("the request allocated %d bytes, over %d", m.alloc, maxRequestAlloc)
			}
			if len(r.Body) > service.MaxPageBytes+64<<10 {
				t.Errorf("the page is %d bytes, over the bound %d", len(r.Body), service.MaxPageBytes)
			}
			first := decodePage(t, r)
			// As many turns as fit the bound, the newest.
			want := service.MaxPageBytes / (tc.perTurn + 1024)
			ids := first.ids(t, payload, tc.hex)
			sameIDs(t, "first page", ids, all[len(all)-want:])
			if first.NextCursor == "" || first.NextBeforeTurnID == nil || *first.NextBeforeTurnID != strconv.FormatUint(ids[0], 10) {
				t.Fatalf("first page: next_cursor %q, next_before_turn_id %v: want both, at turn %d", first.NextCursor, first.NextBeforeTurnID, ids[0])
			}

			// Older pages by next_cursor (base64) or by
			// next_before_turn_id as the CXDB UI pages (hex), to the
			// root; then (base64) newer pages by prev_cursor.
			got, page, pageIDs := ids, first, ids
			for page.NextCursor != "" {
				next := path + "&cursor=" + page.NextCursor
				if tc.hex {
					next = path + "&before_turn_id=" + *page.NextBeforeTurnID
				}
				r, m := getMeasured(t, h, next, buf)
				if m.alloc > maxRequestAlloc {
					t.Errorf("%s allocated %d bytes", next, m.alloc)
				}
				page, pageIDs = scanPage(t, r)
				if len(pageIDs) == 0 || *page.NextBeforeTurnID != strconv.FormatUint(pageIDs[0], 10) {
					t.Fatalf("%s: turns %v, next_before_turn_id %v", next, pageIDs, page.NextBeforeTurnID)
				}
				got = slices.Concat(pageIDs, got)
			}
			sameIDs(t, "paging older", got, all)
			if tc.hex {
				return
			}
			// And back towards the head by prev_cursor.
			got = slices.Clone(pageIDs)
			for page.PrevCursor != "" {
				r, _ := getMeasured(t, h, path+"&cursor="+page.PrevCursor, buf)
				page, pageIDs = scanPage(t, r)
				got = append(got, pageIDs...)
			}
			sameIDs(t, "paging newer", got, all)
		})
	}
}

// TestATurnTooLargeForAPageCarriesAnError: a turn whose rendering alone
// passes the bound (40 MB is 53 MB as base64) is answered, alone, with a
// TOO_LARGE error naming its blob, in the raw and in the typed view; the
// turns around it page as usual. The blob route still serves its bytes,
// and a file of it as JSON is refused.
func TestATurnTooLargeForAPageCarriesAnError(t *testing.T) {
	h := apitest.NewCXDB(t)
	h.Call(http.MethodPut, "/v1/registry/bundles/bounds", boundsBundle).Want(t, http.StatusCreated)
	c := h.Client()
	small, big := binPayload(100, 's'), binPayload(40_000_000, 'b')
	ctxID := newContext(t, c)
	first := appendTyped(t, c, ctxID, "test.Blob", small)
	bigID := appendTyped(t, c, ctxID, "test.Blob", big)
	last := appendTyped(t, c, ctxID, "test.Blob", small)
	buf := make([]byte, service.MaxPageBytes+1<<20)
	d := apitest.NewDocCheck(t, h.URL)

	for _, view := range []string{"raw", "typed"} {
		path := fmt.Sprintf("/v1/contexts/%d/turns?limit=10&view=%s", ctxID, view)
		var got []uint64
		cursor := ""
		for i := 0; i < 3; i++ {
			r, m := getMeasured(t, h, path+cursor, buf)
			if m.alloc > maxRequestAlloc {
				t.Errorf("%s%s allocated %d bytes", path, cursor, m.alloc)
			}
			page := decodePage(t, r)
			if len(page.Turns) != 1 {
				t.Fatalf("%s: page %d has %d turns, want 1", view, i, len(page.Turns))
			}
			turn := page.Turns[0]
			id, _ := strconv.ParseUint(turn.TurnID, 10, 64)
			got = append([]uint64{id}, got...)
			if id == bigID {
				t.Logf("%s: %v: %s", view, m, r.Body)
				if turn.Error["code"] != "TOO_LARGE" || turn.Error["blob"] == "" || turn.Error["limit"] != float64(service.MaxPageBytes) || turn.BytesB64 != nil {
					t.Errorf("%s: the large turn: %s", view, r.Body)
				}
				if view == "raw" && turn.ContentHash != turn.Error["blob"] {
					t.Errorf("raw: content_hash_b3 %q, error blob %v", turn.ContentHash, turn.Error["blob"])
				}
				d.Call(http.StatusOK, http.MethodGet, path+cursor, nil)
			}
			if (page.NextCursor == "") != (i == 2) {
				t.Fatalf("%s: page %d: next_cursor %q", view, i, page.NextCursor)
			}
			cursor = "&cursor=" + page.NextCursor
		}
		sameIDs(t, view, got, []uint64{first, bigID, last})
	}

	// The blob itself is served (64 MiB at most, charged to the budget),
	// a file of it as JSON is not.
	hash := turnBlob(t, h, ctxID, bigID)
	r, m := getMeasured(t, h, "/v1/blobs/"+hash, buf)
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, big) {
		t.Fatalf("GET /v1/blobs/%s: %d, %d bytes", hash, r.Status, len(r.Body))
	}
	t.Logf("the blob: %v", m)
	var hb client.Hash
	hex.Decode(hb[:], []byte(hash))
	root, _, err := c.PutBlob(context.Background(), fstree.Encode([]fstree.Entry{{Name: "big.bin", Mode: 0o644, Size: uint64(len(big)), Hash: hb, HashOK: true}}))
	if err != nil {
		t.Fatal(err)
	}
	withFS, err := c.AppendTurn(context.Background(), &client.AppendRequest{ContextID: ctxID, TypeID: "test.Blob", TypeVersion: 1, Payload: small, FSRootHash: &root})
	if err != nil {
		t.Fatal(err)
	}
	file := fmt.Sprintf("/v1/turns/%d/fs/big.bin", withFS.NewTurnID)
	e := d.Call(http.StatusUnprocessableEntity, http.MethodGet, file+"?format=json", nil).APIError(t)
	if e.Details["limit"] != float64(service.MaxPageBytes) || e.Details["hash"] != hash {
		t.Errorf("format=json of a 40 MB file: %+v", e)
	}
	if r, _ := getMeasured(t, h, file, buf); r.Status != http.StatusOK || len(r.Body) != len(big) {
		t.Errorf("the file's bytes: %d, %d bytes", r.Status, len(r.Body))
	}
}

// turnBlob is the hash of a turn's payload, from the raw view.
func turnBlob(t testing.TB, h *apitest.CXDB, ctxID, turnID uint64) string {
	t.Helper()
	page := getPage(t, h, fmt.Sprintf("/v1/contexts/%d/turns?limit=10000&view=raw&bytes_render=len_only", ctxID))
	for _, turn := range page.Turns {
		if turn.TurnID == strconv.FormatUint(turnID, 10) {
			return turn.ContentHash
		}
	}
	t.Fatalf("turn %d is not on context %d", turnID, ctxID)
	return ""
}

// TestTypedRenderingOverItsBoundIsATurnError is the reported case of a
// 10 MB payload of ten million empty maps, viewed typed with
// include_unknown=1 (the CXDB UI's call): it took 5 s and 800 MiB. Its
// turn now carries RENDER_LIMIT and the turns beside it render.
func TestTypedRenderingOverItsBoundIsATurnError(t *testing.T) {
	h := apitest.NewCXDB(t)
	h.Call(http.MethodPut, "/v1/registry/bundles/bounds", boundsBundle).Want(t, http.StatusCreated)
	c := h.Client()
	ctxID := newContext(t, c)
	payload := emptyMapsPayload(10_000_000)
	// Not the first turn, whose metadata a worker reads.
	appendTyped(t, c, ctxID, "test.Maps", []byte{0x80})
	maps := appendTyped(t, c, ctxID, "test.Maps", payload)
	plain := appendTyped(t, c, ctxID, "test.Maps", []byte{0x81, 0x01, 0xa2, 'h', 'i'})
	buf := make([]byte, 1<<20)
	for _, include := range []string{"1", "true"} {
		path := fmt.Sprintf("/v1/contexts/%d/turns?view=typed&include_unknown=%s", ctxID, include)
		r, m := getMeasured(t, h, path, buf)
		t.Logf("include_unknown=%s: %v: %s", include, m, r.Body)
		if m.alloc > maxRequestAlloc {
			t.Errorf("the request allocated %d bytes, over %d", m.alloc, maxRequestAlloc)
		}
		var page turnsBody
		if err := json.Unmarshal(r.Body, &page); err != nil || r.Status != http.StatusOK || len(page.Turns) != 3 {
			t.Fatalf("status %d, %v: %.300s", r.Status, err, r.Body)
		}
		over, ok := page.Turns[1], page.Turns[2]
		if over.TurnID != strconv.FormatUint(maps, 10) || over.Error["code"] != "RENDER_LIMIT" || over.Data != nil || over.Error["limit"] == nil {
			t.Errorf("the turn of 10M empty maps: %+v", over)
		}
		if ok.TurnID != strconv.FormatUint(plain, 10) || ok.Error != nil || ok.Data["text"] != "hi" {
			t.Errorf("the turn beside it: %+v", ok)
		}
	}
	// Without unknown fields the maps are skipped, not rendered.
	page := getPage(t, h, fmt.Sprintf("/v1/contexts/%d/turns?view=typed", ctxID))
	if len(page.Turns) != 3 || page.Turns[1].Error != nil {
		t.Errorf("typed without unknowns: %+v", page.Turns)
	}
	apitest.NewDocCheck(t, h.URL).Call(http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/contexts/%d/turns?view=both&include_unknown=1", ctxID), nil)
}

// TestLargeAnswersAreChargedToTheBinaryPortsBudget: a page is charged to
// the binary server's answer budget from before it is rendered until it
// is sent; when the budget has no room the request is 503 with
// Retry-After, as are blobs; small answers are not charged.
func TestLargeAnswersAreChargedToTheBinaryPortsBudget(t *testing.T) {
	h := apitest.NewCXDBWith(t, apitest.Options{AnswerWait: 50 * time.Millisecond})
	c := h.Client()
	ctxID := newContext(t, c)
	payload := binPayload(10_000_000, 'p')
	for range 4 {
		appendTyped(t, c, ctxID, "test.Blob", payload)
	}
	budget := h.Bin.ReplyBudget()
	const tenant = "default" // dev mode
	held := func() bool {
		if budget.TryAcquire(tenant, budget.Share()) {
			budget.Release(tenant, budget.Share())
			return false
		}
		return true
	}
	raw := fmt.Sprintf("/v1/contexts/%d/turns?view=raw", ctxID)
	hash := turnBlob(t, h, ctxID, getPage(t, h, raw+"&limit=1&bytes_render=len_only").idsOnly(t)[0])

	// Spent (by binary answers, say): large answers are refused.
	if err := budget.Acquire(context.Background(), tenant, budget.Share()); err != nil {
		t.Fatal(err)
	}
	d := apitest.NewDocCheck(t, h.URL)
	for _, path := range []string{raw, "/v1/blobs/" + hash} {
		r := d.Call(http.StatusServiceUnavailable, http.MethodGet, path, nil)
		if e := r.APIError(t); r.Header.Get("Retry-After") != "1" || e.Kind != "UNAVAILABLE" || e.Details["needed_bytes"] == nil {
			t.Errorf("%s with the budget spent: %+v, Retry-After %q", path, e, r.Header.Get("Retry-After"))
		}
	}
	d.Call(http.StatusOK, http.MethodGet, raw+"&bytes_render=len_only", nil)
	budget.Release(tenant, budget.Share())

	// A page holds its bytes while its client has not taken it.
	req, err := http.NewRequest(http.MethodGet, h.URL+raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if !held() {
		t.Fatal("a 40 MB page not yet read holds nothing of the budget")
	}
	n, err := io.Copy(io.Discard, res.Body)
	if err != nil || res.StatusCode != http.StatusOK || n < 3*int64(base64.StdEncoding.EncodedLen(len(payload))) {
		t.Fatalf("the page: %d, %d bytes, %v", res.StatusCode, n, err)
	}
	res.Body.Close()
	waitfor.Soon(t, "the page's bytes released once sent", func() bool { return !held() })
}

func (p rawPage) idsOnly(t testing.TB) []uint64 {
	t.Helper()
	var out []uint64
	for _, turn := range p.Turns {
		id, err := strconv.ParseUint(turn.TurnID, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}
