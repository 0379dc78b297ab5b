package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// Postgres's disk full under the binary surface: the turns table lives on
// a small tmpfs, which the test fills. APPEND_TURN is answered ERROR 507
// DISK_FULL (it was 500 INTERNAL), the connection stays open, and appends
// work again once space is freed.
func TestPostgresFullDiskIsError507(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{allowLog: func(r string) bool { return strings.Contains(r, "disk is full") }})
	dir := pgtest.SmallDisk(t, e.pool.Config().ConnConfig.Database, 4<<20, "turns")
	c := dialRaw(t, e.addr)
	c.expectOK(cxdbcompat.MsgHello, 0, cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientTag: "t"}.AppendTo(nil))
	head, err := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	if err != nil {
		t.Fatal(err)
	}
	free := pgtest.FillDisk(t, dir)
	var f cxdbcompat.Frame
	for i := 0; ; i++ {
		if i > 10_000 {
			t.Fatal("Postgres's disk never filled up")
		}
		f = c.call(cxdbcompat.MsgAppendTurn, 0, appendReq(head.ContextID, 0, []byte(fmt.Sprintf("turn %d", i))).AppendTo(nil))
		if f.Type != cxdbcompat.MsgAppendTurn {
			break
		}
	}
	if r := requireError(t, f, 507); r.Kind != "DISK_FULL" || !strings.Contains(r.Message, "Postgres's disk is full") {
		t.Fatalf("APPEND_TURN on Postgres's full disk: %+v", r)
	}
	free()
	c.expectOK(cxdbcompat.MsgAppendTurn, 0, appendReq(head.ContextID, 0, []byte("after")).AppendTo(nil))
}
