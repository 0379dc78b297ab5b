package daemon_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// scrape returns the samples of /metrics whose name starts with prefix,
// by name and labels as the text format writes them
// (`cardbox_segments{file="blobs",state="sealed"}`).
func scrape(t *testing.T, d *daemon.Daemon, prefix string) map[string]float64 {
	t.Helper()
	return scrapeAs(t, d, "", prefix)
}

// scrapeAs is scrape with a key's secret (hosted mode; "": none).
func scrapeAs(t *testing.T, d *daemon.Daemon, secret, prefix string) map[string]float64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+d.HTTPAddr()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out := map[string]float64{}
	lines := bufio.NewScanner(res.Body)
	for lines.Scan() {
		line := lines.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func segmentSample(metric, file, state string) string {
	return fmt.Sprintf("%s{file=%q,state=%q}", metric, file, state)
}

// cardboxd's segment size reaches the store: with a small one, appends
// fill many segments of both files, and /metrics counts them, sealed and
// active, with their bytes adding up to the files' sizes.
func TestSegmentsOnMetrics(t *testing.T) {
	var dir string
	d := daemontest.New(t, func(c *daemon.Config) { c.SegmentSize, dir = 1<<10, c.DataDir })
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	c, err := client.Dial(ctx, d.BinaryAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 30 {
		payload := append([]byte{0xc5, 0x01, 0x2c}, make([]byte, 300)...) // msgpack bin 16 of 300 random bytes
		rand.Read(payload[3:])
		if _, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: head.ContextID, TypeID: "test.Blob", TypeVersion: 1, Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]int{}
	for file, layout := range map[string]segment.Layout{
		store.FileBlobs: blobpack.Layout(store.BlobDir(dir)),
		store.FileTurns: turnlog.Layout(store.TurnLogPath(dir)),
	} {
		ids, err := layout.List()
		if err != nil {
			t.Fatal(err)
		}
		files[file] = len(ids)
	}
	if files[store.FileBlobs] < 5 || files[store.FileTurns] < 3 {
		t.Fatalf("segment files: %v; want many with a segment size of 1 KiB", files)
	}
	var m map[string]float64
	waitfor.True(t, "every closed segment sealed on /metrics", ioTimeout, func() bool {
		m = scrape(t, d, "cardbox_")
		for file, n := range files {
			if m[segmentSample("cardbox_segments", file, store.SegmentSealed)] != float64(n-1) {
				return false
			}
		}
		return true
	})
	for file, size := range map[string]string{store.FileBlobs: "cardbox_blob_pack_bytes", store.FileTurns: "cardbox_turn_log_bytes"} {
		if got := m[segmentSample("cardbox_segments", file, store.SegmentActive)]; got != 1 {
			t.Errorf("%s: %v active segments, want 1", file, got)
		}
		if got := m[segmentSample("cardbox_segments", file, store.SegmentClosed)]; got != 0 {
			t.Errorf("%s: %v closed segments waiting to be sealed, want 0", file, got)
		}
		sum := m[segmentSample("cardbox_segment_bytes", file, store.SegmentSealed)] + m[segmentSample("cardbox_segment_bytes", file, store.SegmentActive)]
		if sum != m[size] || sum == 0 {
			t.Errorf("%s: the segments hold %v bytes, %s is %v", file, sum, size, m[size])
		}
	}
}
