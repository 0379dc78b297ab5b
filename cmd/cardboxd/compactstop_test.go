package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/api/adminhttp"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// stopWithin is how long a server may take to exit after SIGTERM while a
// rate-limited compaction runs: the compaction is cancelled at once, not
// finished.
const stopWithin = 5 * time.Second

// TestSIGTERMStopsASlowCompactionPromptly sends SIGTERM to a real server
// while a compaction of many segments runs at a rate that would make it
// last far longer than stopWithin, and checks that the server exits
// cleanly within it, saying that shutdown stopped the compaction. After a
// restart every live turn reads byte for byte, no rewrite is left beside
// the segments, a compaction runs to its end, the files are smaller and
// `cardbox verify` finds the store clean.
func TestSIGTERMStopsASlowCompactionPromptly(t *testing.T) {
	const slowRate = 4096 // bytes per second
	rig := newSlowCompaction(t, slowRate, "charlie", 16)
	srv := rig.srv
	now := rig.compactASegment(t)
	// Each segment left is read twice at least: the time that takes at
	// the rate must be well past stopWithin, or an exit in time proves
	// nothing.
	left := time.Duration(now.SegmentsTotal-now.SegmentsDone) * 2 * 8192 * time.Second / slowRate
	if now.State != adminhttp.CompactionRunning || left < 2*stopWithin {
		t.Fatalf("the compaction is too near its end to test a stop (%+v, %v left at the rate)", now, left)
	}

	sent := time.Now()
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("cardboxd after SIGTERM: %v\n%s", err, srv.log)
		}
	case <-time.After(stopWithin):
		_ = srv.cmd.Process.Kill()
		<-exited
		t.Fatalf("cardboxd still ran %v after SIGTERM, with a compaction of %d of %d segments done and %v left at the rate:\n%s",
			stopWithin, now.SegmentsDone, now.SegmentsTotal, left, srv.log)
	}
	t.Logf("exited %v after SIGTERM, the compaction at %d of %d segments (%v left at the rate)",
		time.Since(sent).Round(time.Millisecond), now.SegmentsDone, now.SegmentsTotal, left)
	if !strings.Contains(srv.log.String(), "compaction stopped by shutdown") {
		t.Fatalf("the log does not say that shutdown stopped the compaction:\n%s", srv.log)
	}

	// The next start is clean: every live turn reads, and no rewrite
	// was left beside its segment (a file of each segment only).
	srv.env = rig.unlimited
	srv.start()
	checkLive(t, srv, rig.secret, rig.live, rig.deleted)
	checkOneGenerationEach(t, rig.dir)
	rig.compactToTheEnd(t)
}

// checkOneGenerationEach checks that no segment of the turn log or the
// blob pack under dataDir has two generations on disk: a rewrite left
// beside its segment.
func checkOneGenerationEach(t *testing.T, dataDir string) {
	t.Helper()
	n := 0
	for _, layout := range []segment.Layout{turnlog.Layout(store.TurnLogPath(dataDir)), blobpack.Layout(store.BlobDir(dataDir))} {
		names, err := filepath.Glob(filepath.Join(layout.Dir, layout.Base+"*"))
		if err != nil {
			t.Fatal(err)
		}
		gens := map[int64]string{}
		for _, path := range names {
			id, ok := layout.Parse(filepath.Base(path))
			if !ok {
				continue
			}
			n++
			if other, ok := gens[id.Start]; ok {
				t.Fatalf("two generations of one segment on disk: %s and %s", other, path)
			}
			gens[id.Start] = path
		}
	}
	if n == 0 {
		t.Fatalf("no segment files under %s", dataDir)
	}
}
