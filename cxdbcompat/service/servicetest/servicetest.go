// Package servicetest gives tests a CXDB service over a real turn store
// (files in a temporary directory, a fresh Postgres database from
// internal/pgtest) with the conversation bundle published, and the
// appends they write most.
package servicetest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/metastore"
)

// The conversation bundle's item type.
const (
	ConversationItem    = "cxdb.ConversationItem"
	ConversationVersion = 3
)

// Fixture is a service as the default tenant uses it; its methods fail
// the test on error.
type Fixture struct {
	T      testing.TB
	Ctx    context.Context
	Svc    *service.Service
	Tenant ident.Tenant
}

// New returns a service over a new store, closed when t ends.
func New(t testing.TB) *Fixture {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	engine, err := store.Open(ctx, store.Options{Dir: t.TempDir(), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := engine.Close(); err != nil {
			t.Errorf("close the store: %v", err)
		}
	})
	f := &Fixture{T: t, Ctx: ctx, Svc: service.New(engine, metastore.New(pool, 0, engine), service.Options{})}
	if f.Tenant, err = engine.Tenant(ctx, ident.DefaultTenantID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Svc.PublishBundle(ctx, f.Tenant, "", registry.ConversationBundle); err != nil {
		t.Fatal(err)
	}
	return f
}

// NewContext creates a context (a fork when base is a turn).
func (f *Fixture) NewContext(base uint64) uint64 {
	f.T.Helper()
	h, err := f.Svc.CreateContext(f.Ctx, f.Tenant, base, "test")
	if err != nil {
		f.T.Fatal(err)
	}
	return h.ContextID
}

// Say appends a user message to contextID's head.
func (f *Fixture) Say(contextID uint64, text string) store.AppendResult {
	f.T.Helper()
	return f.AppendJSON(UserInput(contextID, text))
}

// AppendJSON appends a as the HTTP API's JSON appends do.
func (f *Fixture) AppendJSON(a service.JSONAppend) store.AppendResult {
	f.T.Helper()
	res, err := f.Svc.AppendJSON(f.Ctx, f.Tenant, a)
	if err != nil {
		f.T.Fatalf("append %s: %v", a.Data, err)
	}
	return res
}

// Chain appends n messages to a new context and returns it and the
// turns' ids, oldest first.
func (f *Fixture) Chain(n int) (uint64, []uint64) {
	f.T.Helper()
	c := f.NewContext(0)
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = f.Say(c, "message").TurnID
	}
	return c, ids
}

// AppendRaw appends payload as it is, declared as typeID and version.
func (f *Fixture) AppendRaw(contextID uint64, typeID string, version uint32, payload []byte) uint64 {
	f.T.Helper()
	res, err := f.Svc.Append(f.Ctx, f.Tenant, &store.AppendRequest{
		ContextID: contextID, TypeID: typeID, TypeVersion: version, Encoding: 1,
		UncompressedLen: uint32(len(payload)), ContentHash: ident.HashOf(payload), Payload: payload,
	})
	if err != nil {
		f.T.Fatal(err)
	}
	return res.TurnID
}

// UserInput is a JSON append of a user message to contextID's head.
func UserInput(contextID uint64, text string) service.JSONAppend {
	data, err := json.Marshal(map[string]any{"item_type": "user_input", "user_input": map[string]any{"text": text}})
	if err != nil {
		panic(err) // a map of strings always marshals
	}
	return service.JSONAppend{ContextID: contextID, TypeID: ConversationItem, TypeVersion: ConversationVersion, Data: data}
}
