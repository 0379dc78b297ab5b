package sdk_test

import (
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
	t.Run("server", func(t *testing.T) { real = contract.Run(t, client(t, srv, sdk.Config{ClientTag: "contract"})) })
	t.Run("fake", func(t *testing.T) { faked = contract.Run(t, fake.New()) })
	if t.Failed() {
		return
	}
	if a, b := real.String(), faked.String(); a != b {
		t.Fatalf("the fake and the server differ:\n--- server\n%s\n--- fake\n%s", a, b)
	}
}
