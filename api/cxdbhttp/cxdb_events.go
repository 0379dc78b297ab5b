package cxdbhttp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cxdbcompat/live"
)

// Event streams: a comment every heartbeatEvery keeps proxies and clients
// from timing out an idle stream; a write that cannot finish within
// eventWriteTimeout means the client stopped reading, and ends it.
const (
	heartbeatEvery    = 15 * time.Second
	eventWriteTimeout = 30 * time.Second
	eventBatch        = 256
)

// streamEpoch tells this process's event ids from an earlier one's: ids
// restart at 1 with every start, so a Last-Event-ID of another epoch is
// answered with a reset.
var streamEpoch = strconv.FormatInt(time.Now().UnixMilli(), 36)

// events serves GET /v1/events as server-sent events. Every event has an
// id; a client reconnecting with Last-Event-ID gets what it missed while
// the server still holds it, and an event "reset" when it does not (it
// should reload what it shows). It is exempt from the write deadline that
// bounds other responses.
func (r *Routes) events(c echo.Context) error {
	t, err := r.tenant(c)
	if err != nil {
		return err
	}
	stream := r.svc.Hub().Stream
	after, reset := resumeFrom(c.Request().Header.Get("Last-Event-ID"), stream.LastID(t.ID))
	sub := stream.Subscribe(t.ID, after)
	defer sub.Close()

	w := &sseWriter{c: c, rc: http.NewResponseController(c.Response())}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	c.Response().WriteHeader(http.StatusOK)
	w.raw(fmt.Sprintf("retry: 2000\nid: %s\nevent: connected\ndata: {}\n\n", eventID(after)))
	if reset {
		w.reset()
	}
	if err := w.flush(); err != nil {
		return nil
	}
	return r.pump(c, sub, w)
}

// pump writes events as they come until the client leaves, the server
// stops, or (hosted mode) its key is found revoked at a heartbeat.
func (r *Routes) pump(c echo.Context, sub *live.Subscription, w *sseWriter) error {
	ctx := c.Request().Context()
	beat := time.NewTicker(r.heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.stop:
			return nil
		case <-beat.C:
			if !api.StillValid(ctx) {
				return nil // the key was revoked or expired: end the stream
			}
			w.raw(":heartbeat\n\n")
		case <-sub.Wake():
			evs, reset := sub.Next(eventBatch)
			if reset {
				w.reset()
			}
			for _, ev := range evs {
				w.event(ev)
			}
		}
		if err := w.flush(); err != nil {
			return nil
		}
	}
}

// resumeFrom reads Last-Event-ID: the event after which to resume, and
// whether the id is of another process (or unreadable), so the client
// must reset.
func resumeFrom(header string, newest uint64) (after uint64, reset bool) {
	if header == "" {
		return newest, false
	}
	epoch, n, ok := strings.Cut(header, "-")
	id, err := strconv.ParseUint(n, 10, 64)
	if !ok || err != nil || epoch != streamEpoch || id > newest {
		return newest, true
	}
	return id, false
}

func eventID(n uint64) string { return streamEpoch + "-" + strconv.FormatUint(n, 10) }

// sseWriter buffers one flush worth of the stream.
type sseWriter struct {
	c   echo.Context
	rc  *http.ResponseController
	buf []byte
}

func (w *sseWriter) raw(s string) { w.buf = append(w.buf, s...) }

func (w *sseWriter) event(ev live.Event) {
	data, err := json.Marshal(ev.Data)
	if err != nil {
		data = []byte("{}")
	}
	w.buf = fmt.Appendf(w.buf, "id: %s\nevent: %s\ndata: %s\n\n", eventID(ev.ID), ev.Name, data)
}

func (w *sseWriter) reset() {
	w.raw("event: reset\ndata: {\"reason\":\"events were missed; reload the contexts\"}\n\n")
}

func (w *sseWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
	if _, err := w.c.Response().Write(w.buf); err != nil {
		return err
	}
	w.buf = w.buf[:0]
	return w.rc.Flush()
}
