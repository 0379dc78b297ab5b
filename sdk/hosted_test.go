package sdk_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/sdk"
	"github.com/cardboxhq/cardbox/sdk/fake"
	"github.com/cardboxhq/cardbox/sdk/internal/cardboxd"
	"github.com/cardboxhq/cardbox/sdk/internal/contract"
)

// startHosted runs cardboxd in hosted mode with an operator key from a
// secret file (as a container would) and returns it with a writer key of
// a new tenant, made through the admin API.
func startHosted(t *testing.T) (*cardboxd.Server, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "cardbox-sdk-key-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	id, secret := make([]byte, 8), make([]byte, 32)
	rand.Read(id)
	rand.Read(secret)
	operator := "cbk_key_" + hex.EncodeToString(id) + "_" + base64.RawURLEncoding.EncodeToString(secret)
	keyFile := filepath.Join(dir, "operator.key")
	if err := os.WriteFile(keyFile, []byte(operator), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := cardboxd.Start(t, "CARDBOX_MODE=hosted", "CARDBOX_OPERATOR_KEY_FILE="+keyFile)
	admin(t, srv, operator, "/admin/tenants", `{"tenant_id":"acme"}`, nil)
	var key struct{ Secret string }
	admin(t, srv, operator, "/admin/keys", `{"tenant_id":"acme","role":"writer"}`, &key)
	return srv, key.Secret
}

// admin POSTs body to an admin route as the operator, wanting 201.
func admin(t *testing.T, srv *cardboxd.Server, operator, path, body string, answer any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.HTTPURL+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+operator)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST %s: %d %s", path, res.StatusCode, b)
	}
	if answer != nil {
		if err := json.Unmarshal(b, answer); err != nil {
			t.Fatal(err)
		}
	}
}

// In hosted mode the SDK carries its key on both surfaces: the contract
// suite passes with it and agrees with the fake; without a key, or with
// a wrong one, the first request is ErrUnauthorized.
func TestHostedServerWithAnAPIKey(t *testing.T) {
	srv, key := startHosted(t)
	var real, faked *contract.Transcript
	t.Run("server", func(t *testing.T) { real = contract.Run(t, client(t, srv, sdk.Config{APIKey: key})) })
	t.Run("fake", func(t *testing.T) { faked = contract.Run(t, fake.New()) })
	if !t.Failed() && real.String() != faked.String() {
		t.Fatalf("the fake and the hosted server differ:\n--- server\n%s\n--- fake\n%s", real, faked)
	}
	for _, bad := range []string{"", "cbk_key_0000000000000000_" + base64.RawURLEncoding.EncodeToString(make([]byte, 32))} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c := sdk.NewClient(sdk.Config{BinaryAddr: srv.BinAddr, HTTPURL: srv.HTTPURL, APIKey: bad})
		_, binErr := c.CreateContext(ctx, "")
		_, httpErr := c.ListTurns(ctx, "1", "", 1)
		c.Close()
		cancel()
		if !errors.Is(binErr, sdk.ErrUnauthorized) || !errors.Is(httpErr, sdk.ErrUnauthorized) {
			t.Errorf("key %q: binary %v, HTTP %v; want ErrUnauthorized on both", bad, binErr, httpErr)
		}
	}
	t.Run("agent loop example", func(t *testing.T) { agentLoopOnServer(t, srv, key) })
}

// agentLoopOnServer runs the documented agent loop (Example_agentLoop)
// against a real server and wants the output it gives on the fake.
func agentLoopOnServer(t *testing.T, srv *cardboxd.Server, key string) {
	t.Helper()
	onFake := captureStdout(t, Example_agentLoop)
	real := exampleStore
	t.Cleanup(func() { exampleStore = real })
	exampleStore = func() sdk.Store { return client(t, srv, sdk.Config{APIKey: key}) }
	onServer := captureStdout(t, Example_agentLoop)
	if onServer != onFake || onFake == "" {
		t.Fatalf("the agent loop example printed on the server:\n%s\non the fake:\n%s", onServer, onFake)
	}
}

// captureStdout returns what f prints.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	saved := os.Stdout
	os.Stdout = w
	read := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); read <- b }()
	defer func() {
		os.Stdout = saved
	}()
	f()
	os.Stdout = saved
	w.Close()
	return string(<-read)
}
