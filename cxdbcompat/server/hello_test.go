package server_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store"
)

func TestParseCredential(t *testing.T) {
	tests := []struct {
		name  string
		hello cxdbcompat.HelloRequest
		want  server.Credential
	}{
		{"a plain tag", cxdbcompat.HelloRequest{ClientTag: "agent-7"}, server.Credential{ClientTag: "agent-7"}},
		{"a key in the tag", cxdbcompat.HelloRequest{ClientTag: "agent-7;key=cbk_key_x_y"}, server.Credential{ClientTag: "agent-7", Secret: "cbk_key_x_y"}},
		{"the tag is the key", cxdbcompat.HelloRequest{ClientTag: "cbk_key_0123456789abcdef_zzz"}, server.Credential{Secret: "cbk_key_0123456789abcdef_zzz"}},
		{"the metadata's key wins", cxdbcompat.HelloRequest{ClientTag: "agent;key=from-tag", ClientMetaJSON: []byte(`{"api_key":"from-meta"}`)},
			server.Credential{ClientTag: "agent", Secret: "from-meta"}},
		{"metadata without a key", cxdbcompat.HelloRequest{ClientTag: "agent;key=from-tag", ClientMetaJSON: []byte(`{"name":"x"}`)},
			server.Credential{ClientTag: "agent", Secret: "from-tag"}},
		{"metadata that is no JSON", cxdbcompat.HelloRequest{ClientTag: "agent", ClientMetaJSON: []byte(`not json`)}, server.Credential{ClientTag: "agent"}},
		{"nothing", cxdbcompat.HelloRequest{}, server.Credential{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := server.ParseCredential(tt.hello); got != tt.want {
				t.Fatalf("ParseCredential = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// tenantCounter counts the tenant resolutions the server asks of the store.
type tenantCounter struct {
	store.TurnStore
	resolved atomic.Int32
}

func (c *tenantCounter) Tenant(ctx context.Context, id string) (ident.Tenant, error) {
	c.resolved.Add(1)
	return c.TurnStore.Tenant(ctx, id)
}

// A HELLO's client tag is split once, by the session: the authenticator
// is handed the parsed credential, the session keeps the tag without
// its secret; and the granted tenant is resolved once, through the store.
func TestHelloParsesOnceAndResolvesOnce(t *testing.T) {
	counter := &tenantCounter{}
	creds := make(chan server.Credential, 1)
	e := newEnvWith(t, envConfig{
		wrap: func(engine *store.Engine) store.TurnStore { counter.TurnStore = engine; return counter },
		auth: func(*env) server.Authenticator {
			return func(_ context.Context, cred server.Credential) (server.Grant, error) {
				creds <- cred
				return server.Grant{TenantID: "acme", KeyID: "key-1"}, nil
			}
		},
	})
	acme := e.tenant("acme")
	c := dialRaw(t, e.addr)
	c.expectOK(cxdbcompat.MsgHello, 0, cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientTag: "agent;key=cbk_secret"}.AppendTo(nil))

	if got, want := <-creds, (server.Credential{ClientTag: "agent", Secret: "cbk_secret"}); got != want {
		t.Errorf("the authenticator was handed %+v, want %+v", got, want)
	}
	if n := counter.resolved.Load(); n != 1 {
		t.Errorf("the HELLO resolved the tenant %d times, want once", n)
	}
	ids := e.srv.Identities()
	if want := (server.Identity{Tenant: acme, ClientTag: "agent", KeyID: "key-1"}); len(ids) != 1 || ids[0] != want {
		t.Errorf("sessions %+v, want one of %+v", ids, want)
	}
}
