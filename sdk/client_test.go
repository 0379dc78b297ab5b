package sdk_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/sdk"
	"github.com/cardboxhq/cardbox/sdk/fake"
	"github.com/cardboxhq/cardbox/sdk/internal/cardboxd"
	"github.com/cardboxhq/cardbox/sdk/internal/contract"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cardboxd.RemoveBuild()
	os.Exit(code)
}

// client is a Client on srv, closed when the test ends.
func client(t *testing.T, srv *cardboxd.Server, cfg sdk.Config) *sdk.Client {
	t.Helper()
	cfg.BinaryAddr, cfg.HTTPURL = srv.BinAddr, srv.HTTPURL
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestContractFakeAndServerAgree runs the contract suite on the fake and
// on a real cardboxd, and compares what both observed, ids aside.
func TestContractFakeAndServerAgree(t *testing.T) {
	srv := cardboxd.Start(t)
	var real, faked *contract.Transcript
	t.Run("server", func(t *testing.T) {
		c := client(t, srv, sdk.Config{ClientTag: "contract"})
		real = contract.Run(t, c)
		if caps := c.Capabilities(); !caps.ConditionalAppend || !caps.AppendParent {
			t.Errorf("cardboxd announced %+v, want every capability", caps)
		}
	})
	t.Run("fake", func(t *testing.T) { faked = contract.Run(t, fake.New()) })
	if t.Failed() {
		return
	}
	if a, b := real.String(), faked.String(); a != b {
		t.Fatalf("the fake and the server differ:\n--- server\n%s\n--- fake\n%s", a, b)
	}
	t.Run("redaction and compression", func(t *testing.T) { redactAndCompress(t, srv) })
}

// redactAndCompress appends through a redacting, compressing client: the
// server stores the redacted bytes, hashed uncompressed.
func redactAndCompress(t *testing.T, srv *cardboxd.Server) {
	t.Helper()
	ctx := context.Background()
	c := client(t, srv, sdk.Config{CompressAbove: 8, Redact: func(_ string, _ uint32, p []byte) ([]byte, error) {
		return bytes.ReplaceAll(p, []byte("hunter2"), []byte("*******")), nil
	}})
	h, err := c.CreateContext(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("password=hunter2;"), 100)
	want := bytes.ReplaceAll(payload, []byte("hunter2"), []byte("*******"))
	turn, err := c.AppendTurn(ctx, sdk.AppendRequest{ContextID: h.ContextID, TypeID: "t", Payload: payload, IdempotencyKey: "redact/1"})
	if err != nil {
		t.Fatal(err)
	}
	if turn.ContentHash != sdk.HashOf(want) {
		t.Fatalf("hash %s, want the redacted bytes' %s", turn.ContentHash, sdk.HashOf(want))
	}
	got, err := c.Last(ctx, h.ContextID, 1, true)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Payload, want) {
		t.Fatalf("read back %d turns (%v), want the redacted payload", len(got), err)
	}
}
