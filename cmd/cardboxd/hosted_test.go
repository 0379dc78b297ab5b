package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
)

// TestHostedRevocationEndsSessions: in hosted mode, revoking a key (as
// `cardbox key revoke` does, from another process) refuses its next HTTP
// request and closes its open binary sessions within a second, while
// another key's session goes on. It runs the real cardboxd: the key watch
// is wired in run.go.
func TestHostedRevocationEndsSessions(t *testing.T) {
	db := pgtest.NewDB(t)
	srv := newServer(t, t.TempDir(), db)
	srv.env = append(srv.env, "CARDBOX_MODE=hosted")
	srv.start()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	keys := tenancy.New(pool, nil)
	seed.Tenants(t, keys, "acme")
	doomed, doomedSecret := seed.Key(t, keys, "acme", auth.RoleWriter)
	_, keptSecret := seed.Key(t, keys, "acme", auth.RoleWriter)
	gone, kept := helloed(t, srv.binAddr, doomedSecret), helloed(t, srv.binAddr, keptSecret)
	getContexts := func(secret string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.httpURL("/v1/contexts"), nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := getContexts(doomedSecret); got != http.StatusOK {
		t.Fatalf("before the revocation: %d", got)
	}

	if _, err := keys.RevokeKey(ctx, "test", doomed.ID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	if got := getContexts(doomedSecret); got != http.StatusUnauthorized {
		t.Errorf("the next request after the revocation: %d, want 401", got)
	}
	// The server closes the session: the read ends, without an answer.
	_ = gone.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := gone.Read(make([]byte, 1))
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("the revoked key's session: read %d bytes, %v; want it closed", n, err)
	}
	if waited := time.Since(revoked); waited > time.Second {
		t.Errorf("the revoked key's session closed after %v, want within a second", waited)
	}
	// The other key's session is served.
	if f := call(t, kept, cxdbcompat.CtxCreateRequest{}); f.Type != cxdbcompat.MsgCtxCreate {
		t.Errorf("the other key's session: %s", f.Type)
	}
}

// helloed dials the binary listener and authenticates with secret in the
// client tag, as the official clients do.
func helloed(t *testing.T, addr, secret string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if f := call(t, conn, cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientTag: "agent;key=" + secret}); f.Type != cxdbcompat.MsgHello {
		t.Fatalf("HELLO: %s", f.Type)
	}
	return conn
}

// call sends one request and reads its answer.
func call(t *testing.T, conn net.Conn, r cxdbcompat.Request) cxdbcompat.Frame {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := cxdbcompat.WriteFrame(conn, r.MsgType(), r.Flags(), 1, r.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	f, err := cxdbcompat.ReadFrame(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestHostedStorageQuota: cardboxd started with --tenant-quota-bytes
// (its environment variable) refuses the write that would take a tenant
// over it, with binary ERROR 507 and HTTP 507 QUOTA_EXCEEDED, and after a
// kill -9 and a restart the tenant's usage is what it was: the next write
// is still refused. `cardbox tenant quota` (tenancy.Admin.SetQuota) raising
// the quota lets it through.
func TestHostedStorageQuota(t *testing.T) {
	db := pgtest.NewDB(t)
	srv := newServer(t, t.TempDir(), db)
	srv.env = append(srv.env, "CARDBOX_MODE=hosted", "CARDBOX_TENANT_QUOTA_BYTES=4000")
	srv.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	keys := tenancy.New(pool, nil)
	seed.Tenants(t, keys, "acme")
	_, secret := seed.Key(t, keys, "acme", auth.RoleWriter)
	conn := helloed(t, srv.binAddr, secret)
	f := call(t, conn, cxdbcompat.CtxCreateRequest{})
	head, err := cxdbcompat.DecodeHeadResponse(f.Payload)
	if f.Type != cxdbcompat.MsgCtxCreate || err != nil {
		t.Fatalf("CTX_CREATE: %s %v", f.Type, err)
	}
	// Each append of 1000 new bytes adds 1128 (the bytes and the turn).
	appendN := func(conn net.Conn, i int) cxdbcompat.Frame {
		data := bytes.Repeat([]byte{byte('a' + i)}, 1000)
		return call(t, conn, cxdbcompat.AppendTurnRequest{ContextID: head.ContextID, DeclaredTypeID: "t", DeclaredTypeVersion: 1,
			Encoding: cxdbcompat.EncodingMsgpack, UncompressedLen: uint32(len(data)), ContentHash: blake3.Sum256(data), Payload: data})
	}
	wantQuota := func(f cxdbcompat.Frame) {
		t.Helper()
		e, err := cxdbcompat.DecodeErrorResponse(f.Payload)
		if f.Type != cxdbcompat.MsgError || err != nil || e.Code != 507 || e.Kind != "QUOTA_EXCEEDED" {
			t.Fatalf("got %s %+v, want ERROR 507 QUOTA_EXCEEDED", f.Type, e)
		}
	}
	for i := range 3 {
		if f := appendN(conn, i); f.Type != cxdbcompat.MsgAppendTurn {
			t.Fatalf("append %d: %s", i+1, f.Type)
		}
	}
	wantQuota(appendN(conn, 3))
	cards := func(wantStatus int) {
		t.Helper()
		body := strings.NewReader(`{"card_id":"c1","content":"` + strings.Repeat("x", 1000) + `","metadata":{"type":"task.instruction"}}`)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.httpURL("/projects/acme/cards"), body)
		req.Header.Set("Authorization", "Bearer "+secret)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != wantStatus || (wantStatus == 507 && !strings.Contains(string(b), `"kind":"QUOTA_EXCEEDED"`)) {
			t.Fatalf("POST /projects/acme/cards: %d %s, want %d", res.StatusCode, b, wantStatus)
		}
	}
	cards(http.StatusInsufficientStorage)

	srv.kill()
	srv.start()
	conn = helloed(t, srv.binAddr, secret)
	wantQuota(appendN(conn, 3))
	if err := keys.SetQuota(ctx, "test", "acme", 1<<20); err != nil {
		t.Fatal(err)
	}
	// A new server reads the tenant's quota on its first check; this one
	// read it before the change, so the change applies within 5 s: restart
	// rather than wait.
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	srv.start()
	conn = helloed(t, srv.binAddr, secret)
	if f := appendN(conn, 3); f.Type != cxdbcompat.MsgAppendTurn {
		t.Fatalf("append under the raised quota: %s", f.Type)
	}
	cards(http.StatusCreated)
}
