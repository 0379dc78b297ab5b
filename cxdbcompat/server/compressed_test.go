package server_test

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/internal/logtest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
)

// zstdAppend is an APPEND_TURN of raw compressed, declaring declared
// bytes.
func zstdAppend(t *testing.T, ctxID uint64, raw []byte, declared uint32) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	r := appendReq(ctxID, 0, raw)
	r.Compression, r.Payload, r.UncompressedLen = cxdbcompat.CompressionZstd, enc.EncodeAll(raw, nil), declared
	return r.AppendTo(nil)
}

// Zstd bombs (small frames inflating past what they declare) are refused,
// each counted, and logged once per interval, not once each.
func TestZstdBombsAreCountedAndLoggedOnce(t *testing.T) {
	t.Parallel()
	logs := &levelLog{}
	e := newEnvWith(t, envConfig{options: func(o *server.Options) {
		o.Logger = slog.New(logtest.Tee{o.Logger.Handler(), logs})
		o.ErrorLogInterval = time.Hour
	}})
	c := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	bomb := zstdAppend(t, h.ContextID, make([]byte, 8<<20), 100)
	const bombs = 20
	for range bombs {
		c.expectError(cxdbcompat.MsgAppendTurn, 0, bomb, 409)
	}
	if n := counterSum(t, e.srv, "cardbox_binary_compressed_refused_total", nil); n != bombs {
		t.Errorf("cardbox_binary_compressed_refused_total = %v, want %d", n, bombs)
	}
	if recs := logs.with("WARN binary APPEND_TURN refused for its zstd payload"); len(recs) != 1 {
		t.Errorf("%d WARN records for %d bombs within an interval, want 1: %q", len(recs), bombs, recs)
	}
}

// A compressed append is charged to the request budget for the bytes it
// declares, not only for its small frame, while it is in progress.
func TestCompressedAppendIsChargedWhatItDeclares(t *testing.T) {
	t.Parallel()
	var g *gate
	e := newEnvWith(t, envConfig{wrap: func(en *store.Engine) store.TurnStore { g = newGate(en); return g }})
	t.Cleanup(g.release)
	c := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	raw := bytes.Repeat([]byte("x"), 8<<20)
	frame := zstdAppend(t, h.ContextID, raw, uint32(len(raw)))
	if len(frame) > 64<<10 {
		t.Fatalf("the frame is %d bytes: not a small frame", len(frame))
	}
	c.send(cxdbcompat.MsgAppendTurn, 0, 7, frame)
	g.waitEntered(t, 1)
	// A frame's first 64 KiB are free of charge.
	if held := gaugeValue(t, e.srv, "cardbox_binary_request_bytes_held"); held < float64(len(raw)-64<<10) {
		t.Errorf("%v bytes held for a frame declaring %d", held, len(raw))
	}
	g.release()
	if f := c.mustRead(); f.Type != cxdbcompat.MsgAppendTurn {
		t.Fatalf("answer %s, want APPEND_TURN", f.Type)
	}
	waitfor.True(t, "the charge released", 10*time.Second, func() bool {
		return gaugeValue(t, e.srv, "cardbox_binary_request_bytes_held") == 0
	})
}

// gaugeValue reads gauge name from the server's collector.
func gaugeValue(t *testing.T, srv *server.Server, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(srv.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
