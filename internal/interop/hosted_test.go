package interop

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	cxdb "github.com/strongdm/ai-cxdb/clients/go"
)

// cli runs the cardbox CLI against s's configuration and returns its
// standard output.
func (s *server) cli(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = s.env
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("cardbox %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// lastLine is the last line of out, where `cardbox key create` prints the
// secret.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// TestOfficialGoClientHosted is the README's hosted-mode walk-through: the
// CLI creates a tenant and a key beside the running server, the unmodified
// official client authenticates with the key in its client tag, a client
// without one is refused, and revoking the key closes the client's session
// within a second.
func TestOfficialGoClientHosted(t *testing.T) {
	s := startServer(t, nil, "CARDBOX_MODE=hosted")
	cli := build(t, "./cmd/cardbox")
	s.cli(t, cli, "tenant", "create", "acme")
	secret := lastLine(s.cli(t, cli, "key", "create", "--tenant", "acme", "--role", "writer"))
	keyID := strings.Join(strings.Split(secret, "_")[1:3], "_") // cbk_<key id>_<random>

	if c, err := cxdb.Dial(s.binAddr, cxdb.WithClientTag("agent")); err == nil {
		c.Close()
		t.Fatal("a client without a key was served")
	} else if !strings.Contains(err.Error(), "401") {
		t.Fatalf("Dial without a key: %v, want a 401", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cxdb.Dial(s.binAddr, cxdb.WithClientTag("agent;key="+secret))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendTurn(ctx, &cxdb.AppendRequest{ContextID: head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3, Payload: msgpackMap("hi")}); err != nil {
		t.Fatal(err)
	}

	// The same key over HTTP sees the context, tagged without the key.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.httpAddr+"/v1/contexts", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Contexts []struct {
			ContextID string `json:"context_id"`
			ClientTag string `json:"client_tag"`
		} `json:"contexts"`
	}
	err = json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if err != nil || len(list.Contexts) != 1 || list.Contexts[0].ClientTag != "agent" {
		t.Fatalf("GET /v1/contexts = %+v, %v", list, err)
	}

	s.cli(t, cli, "key", "revoke", keyID)
	revoked := time.Now()
	for {
		if _, err := c.GetHead(ctx, head.ContextID); err != nil {
			break
		}
		if time.Since(revoked) > time.Second {
			t.Fatal("the revoked key's session still served a second after `cardbox key revoke` returned")
		}
	}
	t.Logf("session closed %v after the revocation", time.Since(revoked))
}
