package securitytest_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
)

// TestEventStreamOfARevokedKey: a key revoked while its event stream is
// open is refused on its next request; the stream itself is one request
// that began before the revocation.
func TestEventStreamOfARevokedKey(t *testing.T) {
	t.Parallel()
	h := newHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	key, secret := seed.Key(t, h.keys, "acme", auth.RoleReader)
	const streamer cred = "acme reader whose stream is open"
	h.secrets[streamer] = secret

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := bufio.NewScanner(res.Body)
	if name := nextEvent(events); name != "connected" {
		t.Fatalf("first event %q (%v)", name, events.Err())
	}

	if _, err := h.keys.RevokeKey(ctx, "securitytest", key.ID); err != nil {
		t.Fatal(err)
	}
	h.do(t, streamer, request{"GET", "/v1/events", ""}).wantError(t, http.StatusUnauthorized, "UNAUTHORIZED")

	// acme works; what does the stream of the revoked key get?
	c := h.client(t, client.WithClientTag("acme-agent;key="+h.secrets[acmeWriter]))
	if _, err := c.CreateContext(ctx, 0); err != nil {
		t.Fatal(err)
	}
	// The stream ends at its next heartbeat (50 ms here), having
	// delivered at most what came before it.
	for name := nextEvent(events); name != ""; name = nextEvent(events) {
		if name != "client_connected" && name != "context_created" {
			t.Errorf("event %q after the revocation", name)
		}
	}
	if err := events.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
}

// nextEvent reads the next event of a server-sent stream and returns its
// name, skipping comments; "" when the stream ends first.
func nextEvent(sc *bufio.Scanner) string {
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" && name != "":
			return name
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		}
	}
	return ""
}
