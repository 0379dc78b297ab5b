package sdk

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// httpAPI makes the HTTP requests, with the same retry policy as the
// binary protocol.
type httpAPI struct{ cfg *Config }

// do sends a request with retries (connection failures, 429, 503) and
// returns the status and body of the answer. Statuses >= 400 other than
// those in ok become *ServerError.
func (h httpAPI) do(ctx context.Context, what, method, path string, body []byte, ok ...int) (int, []byte, error) {
	var last error
	for attempt := 1; ; attempt++ {
		status, b, err := h.once(ctx, method, path, body)
		if err == nil && status >= 400 && !contains(ok, status) {
			err = httpError(status, b)
		}
		if err == nil {
			return status, b, nil
		}
		last = err
		if !retryable(err) {
			return 0, nil, fmt.Errorf("%s: %w", what, err)
		}
		if attempt >= h.cfg.MaxAttempts {
			return 0, nil, fmt.Errorf("%s: %w after %d attempts: %w", what, ErrUnavailable, attempt, last)
		}
		t := time.NewTimer(backoff(h.cfg, attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, nil, fmt.Errorf("%s: %w (last failure: %v)", what, ctx.Err(), last)
		}
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// maxHTTPAnswer bounds what one answer may make the client hold (a turn
// page is at most 48 MiB of turns, base64 adds a third).
const maxHTTPAnswer = 96 << 20

func (h httpAPI) once(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.cfg.HTTPURL+path, r)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if h.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+h.cfg.APIKey)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, nil, &connError{err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPAnswer+1))
	if err != nil {
		return 0, nil, &connError{fmt.Errorf("read answer: %w", err)}
	}
	if len(b) > maxHTTPAnswer {
		return 0, nil, fmt.Errorf("answer larger than %d bytes", maxHTTPAnswer)
	}
	return resp.StatusCode, b, nil
}

// httpError decodes cardbox's error body {"error":{"code","message",
// "kind","details"}}; anything else keeps the status and the text.
func httpError(status int, body []byte) *ServerError {
	var v struct {
		Error struct {
			Message string         `json:"message"`
			Kind    string         `json:"kind"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil && v.Error.Message != "" {
		return &ServerError{Code: status, Kind: v.Error.Kind, Message: v.Error.Message, Details: v.Error.Details}
	}
	return &ServerError{Code: status, Message: string(bytes.TrimSpace(body[:min(len(body), 512)]))}
}

// turnPage is the raw view of GET /v1/contexts/{id}/turns.
type turnPage struct {
	Turns []struct {
		TurnID       string `json:"turn_id"`
		ParentTurnID string `json:"parent_turn_id"`
		Depth        uint32 `json:"depth"`
		DeclaredType struct {
			TypeID      string `json:"type_id"`
			TypeVersion uint32 `json:"type_version"`
		} `json:"declared_type"`
		ContentHash string `json:"content_hash_b3"`
		BytesB64    string `json:"bytes_b64"`
	} `json:"turns"`
}

// maxPageTurns is the server's cap on a page's limit.
const maxPageTurns = 10000

// ListTurns implements Reader over the HTTP API's raw view.
func (c *Client) ListTurns(ctx context.Context, id ContextID, before TurnID, limit int) ([]StoredTurn, error) {
	what := "list turns of context " + string(id)
	n, err := parseID("context", string(id))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	b, err := parseID("turn", string(before))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%s: %w: limit %d", what, ErrInvalid, limit)
	}
	q := url.Values{"view": {"raw"}, "bytes_render": {"base64"}, "limit": {strconv.Itoa(min(limit, maxPageTurns))}}
	if b != 0 {
		q.Set("before_turn_id", strconv.FormatUint(b, 10))
	}
	_, body, err := c.http.do(ctx, what, http.MethodGet, "/v1/contexts/"+strconv.FormatUint(n, 10)+"/turns?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var page turnPage
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("%s: decode answer: %w", what, err)
	}
	out := make([]StoredTurn, 0, len(page.Turns))
	for _, t := range page.Turns {
		payload, err := base64.StdEncoding.DecodeString(t.BytesB64)
		if err != nil {
			return nil, fmt.Errorf("%s: turn %s: decode payload: %w", what, t.TurnID, err)
		}
		parent := t.ParentTurnID
		if parent == "0" {
			parent = ""
		}
		out = append(out, StoredTurn{
			ContextID: id, TurnID: TurnID(t.TurnID), ParentTurnID: TurnID(parent), Depth: t.Depth,
			TypeID: t.DeclaredType.TypeID, TypeVersion: t.DeclaredType.TypeVersion,
			ContentHash: BlobHash(t.ContentHash), Payload: payload,
		})
	}
	return out, nil
}

// PublishBundle implements Reader. Publishing is idempotent: the same
// bytes again are 204 and succeed.
func (c *Client) PublishBundle(ctx context.Context, bundleID string, bundleJSON []byte) error {
	what := "publish bundle " + bundleID
	if bundleJSON == nil {
		bundleJSON = []byte{}
	}
	_, _, err := c.http.do(ctx, what, http.MethodPut, "/v1/registry/bundles/"+url.PathEscape(bundleID), bundleJSON)
	return err
}

// Bundle implements Reader.
func (c *Client) Bundle(ctx context.Context, bundleID string) ([]byte, error) {
	_, b, err := c.http.do(ctx, "read bundle "+bundleID, http.MethodGet, "/v1/registry/bundles/"+url.PathEscape(bundleID), nil)
	return b, err
}

// routeProbe remembers whether an optional route exists on the server.
type routeProbe struct {
	mu      sync.Mutex
	checked bool
	absent  bool
}

func (p *routeProbe) known() (checked, absent bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checked, p.absent
}

func (p *routeProbe) set(absent bool) {
	p.mu.Lock()
	p.checked, p.absent = true, absent
	p.mu.Unlock()
}

// blobCheckers is how many blobs are checked at once without the batch
// route.
const blobCheckers = 8

// MissingBlobs implements Artifacts: one POST /v1/blobs/missing when the
// server has it, else a check of each blob (a few at a time).
func (c *Client) MissingBlobs(ctx context.Context, hashes []BlobHash) ([]BlobHash, error) {
	for _, h := range hashes {
		if _, err := parseHash(h); err != nil {
			return nil, fmt.Errorf("missing blobs: %w", err)
		}
	}
	if len(hashes) == 0 {
		return nil, nil
	}
	if _, absent := c.missingRoute.known(); !absent {
		missing, err := c.missingBatch(ctx, hashes)
		if err == nil {
			c.missingRoute.set(false)
			return missing, nil
		}
		var se *ServerError
		// No such route: 404, or 405 where GET /v1/blobs/{hash} matches.
		if !errors.As(err, &se) || (se.Code != 404 && se.Code != 405) {
			return nil, err
		}
		c.missingRoute.set(true)
	}
	return c.missingEach(ctx, hashes)
}

// maxMissingPerRequest is the server's bound on one batch check.
const maxMissingPerRequest = 10_000

// missingBatch asks POST /v1/blobs/missing, in requests of at most
// maxMissingPerRequest hashes.
func (c *Client) missingBatch(ctx context.Context, hashes []BlobHash) ([]BlobHash, error) {
	var missing []BlobHash
	for start := 0; start < len(hashes); start += maxMissingPerRequest {
		part, err := c.missingRequest(ctx, hashes[start:min(start+maxMissingPerRequest, len(hashes))])
		if err != nil {
			return nil, err
		}
		missing = append(missing, part...)
	}
	return missing, nil
}

func (c *Client) missingRequest(ctx context.Context, hashes []BlobHash) ([]BlobHash, error) {
	body, _ := json.Marshal(map[string][]BlobHash{"hashes": hashes})
	_, b, err := c.http.do(ctx, "missing blobs", http.MethodPost, "/v1/blobs/missing", body)
	if err != nil {
		return nil, err
	}
	var v struct {
		Missing []BlobHash `json:"missing"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("missing blobs: decode answer: %w", err)
	}
	// The answer spells hashes in lowercase; the caller gets its own.
	asked := make(map[BlobHash]BlobHash, len(hashes))
	for _, h := range hashes {
		asked[BlobHash(strings.ToLower(string(h)))] = h
	}
	missing := make([]BlobHash, 0, len(v.Missing))
	for _, h := range v.Missing {
		mine, ok := asked[h]
		if !ok {
			return nil, fmt.Errorf("missing blobs: the answer names %s, which was not asked", h)
		}
		missing = append(missing, mine)
	}
	return missing, nil
}

// missingEach checks each blob with GET /v1/blobs/{hash}, reading no more
// of a present blob than the status line.
func (c *Client) missingEach(ctx context.Context, hashes []BlobHash) ([]BlobHash, error) {
	present := make([]bool, len(hashes))
	errs := make([]error, len(hashes))
	sem := make(chan struct{}, blobCheckers)
	var wg sync.WaitGroup
	for i, h := range hashes {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			present[i], errs[i] = c.hasBlob(ctx, h)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("missing blobs: %w", err)
	}
	var missing []BlobHash
	for i, h := range hashes {
		if !present[i] {
			missing = append(missing, h)
		}
	}
	return missing, nil
}

func (c *Client) hasBlob(ctx context.Context, h BlobHash) (bool, error) {
	var last error
	for attempt := 1; attempt <= c.cfg.MaxAttempts; attempt++ {
		status, err := c.blobStatus(ctx, h)
		switch {
		case err == nil && status == http.StatusOK:
			return true, nil
		case err == nil && status == http.StatusNotFound:
			return false, nil
		case err == nil:
			err = &ServerError{Code: status, Message: "check blob " + string(h)}
		}
		last = err
		if !retryable(err) || ctx.Err() != nil {
			break
		}
		t := time.NewTimer(backoff(c.http.cfg, attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return false, fmt.Errorf("check blob %s: %w", h, last)
}

func (c *Client) blobStatus(ctx context.Context, h BlobHash) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.HTTPURL+"/v1/blobs/"+string(h), nil)
	if err != nil {
		return 0, err
	}
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, &connError{err}
	}
	// Closing unread drops the connection rather than reading the blob.
	resp.Body.Close()
	return resp.StatusCode, nil
}
