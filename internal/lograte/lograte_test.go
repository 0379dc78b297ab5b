package lograte_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/lograte"
	"github.com/cardboxhq/cardbox/internal/logtest"
	"github.com/cardboxhq/cardbox/internal/testkit"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

func newLimiter(interval time.Duration) (*lograte.Limiter, *logtest.All, *testkit.Clock) {
	logs := &logtest.All{}
	clk := testkit.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	afterFunc := func(d time.Duration, f func()) lograte.Timer { return clk.AfterFunc(d, f) }
	l := lograte.New(slog.New(logs), lograte.Options{Interval: interval, Now: clk.Now, AfterFunc: afterFunc})
	return l, logs, clk
}

var unavailable = lograte.Key{Surface: "binary", Status: 503, Kind: "UNAVAILABLE"}

// counted is how many events the records stand for: one each, or their
// summary's count.
func counted(t *testing.T, recs []string) int {
	t.Helper()
	n := 0
	for _, r := range recs {
		m := regexp.MustCompile(` repeated=(\d+)`).FindStringSubmatch(r)
		if m == nil {
			n++
			continue
		}
		k, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	return n
}

// 10,000 identical errors make two lines: the first, then the count of
// the others at the end of the interval, with the last one's attributes.
func TestRepeatsAreCounted(t *testing.T) {
	l, logs, clk := newLimiter(5 * time.Second)
	ctx := context.Background()
	for i := range 10_000 {
		l.Log(ctx, slog.LevelError, unavailable, "binary request failed", "session", i, "err", "postgres: connection refused")
		if i%1000 == 999 {
			clk.Add(400 * time.Millisecond) // 10,000 in 4 s
		}
	}
	if recs := logs.Records(); len(recs) != 1 || strings.Contains(recs[0], "repeated") {
		t.Fatalf("before the interval is over: %q, want the first error alone", recs)
	}
	clk.Add(time.Second)
	recs := logs.Records()
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2: %q", len(recs), recs)
	}
	want := "binary request failed: 503 UNAVAILABLE ×9,999 in the last 5s surface=binary status=503 kind=UNAVAILABLE repeated=9999 interval=5s session=9999 err=postgres: connection refused"
	if recs[1] != want {
		t.Fatalf("summary\n%q\nwant\n%q", recs[1], want)
	}
	if n := counted(t, recs); n != 10_000 {
		t.Fatalf("the records stand for %d errors, want 10,000", n)
	}
}

// Kinds are counted apart: neither surfaces, statuses nor kinds merge.
func TestKindsAreNotMerged(t *testing.T) {
	l, logs, clk := newLimiter(5 * time.Second)
	keys := []lograte.Key{
		unavailable,
		{Surface: "binary", Status: 507, Kind: "DISK_FULL"},
		{Surface: "http", Status: 503, Kind: "UNAVAILABLE"},
		{Surface: "binary", Status: 503, Kind: "TOO_MANY_CONNECTIONS"},
	}
	for i := range 4000 {
		k := keys[i%len(keys)]
		l.Log(context.Background(), slog.LevelError, k, k.Surface+" request failed")
	}
	clk.Add(5 * time.Second)
	recs := logs.Records()
	if len(recs) != 2*len(keys) {
		t.Fatalf("%d records, want a first and a summary for each of %d kinds: %q", len(recs), len(keys), recs)
	}
	for _, k := range keys {
		prefix := fmt.Sprintf("%s request failed: %d %s ×999 ", k.Surface, k.Status, k.Kind)
		if !containsPrefix(recs, prefix) {
			t.Errorf("no %q in %q", prefix, recs)
		}
	}
}

func containsPrefix(recs []string, prefix string) bool {
	for _, r := range recs {
		if strings.HasPrefix(r, prefix) {
			return true
		}
	}
	return false
}

// A fault that goes on makes a line per interval; once it is over, the
// next error is logged at once.
func TestOngoingAndQuiet(t *testing.T) {
	l, logs, clk := newLimiter(5 * time.Second)
	ctx := context.Background()
	total := 0
	for range 200 { // 20 s, 100 errors every 100 ms
		for range 100 {
			l.Log(ctx, slog.LevelError, unavailable, "binary request failed")
			total++
		}
		clk.Add(100 * time.Millisecond)
	}
	clk.Add(5 * time.Second)
	recs := logs.Records()
	if len(recs) < 4 || len(recs) > 6 {
		t.Fatalf("%d records for 20 s of errors, want one and one per 5 s: %q", len(recs), recs)
	}
	if n := counted(t, recs); n != total {
		t.Fatalf("the records stand for %d errors, want %d", n, total)
	}
	clk.Add(time.Minute)
	l.Log(ctx, slog.LevelError, unavailable, "binary request failed", "again", true)
	if recs := logs.Records(); !strings.Contains(recs[len(recs)-1], "again=true") || strings.Contains(recs[len(recs)-1], "repeated") {
		t.Fatalf("after a quiet minute the next error is not logged at once: %q", recs)
	}
}

// Stop logs what was counted; afterwards every event is logged.
func TestStopLogsTheCounts(t *testing.T) {
	l, logs, clk := newLimiter(5 * time.Second)
	ctx := context.Background()
	for range 10 {
		l.Log(ctx, slog.LevelError, unavailable, "binary request failed")
	}
	clk.Add(time.Second)
	l.Stop()
	recs := logs.Records()
	if len(recs) != 2 || !strings.Contains(recs[1], "×9 in the last 1s") {
		t.Fatalf("after Stop: %q", recs)
	}
	l.Log(ctx, slog.LevelError, unavailable, "binary request failed")
	l.Log(ctx, slog.LevelError, unavailable, "binary request failed")
	if n := len(logs.Records()); n != 4 {
		t.Fatalf("%d records, want each event after Stop", n)
	}
	clk.Add(time.Minute) // no timer left to fire
	if n := len(logs.Records()); n != 4 {
		t.Fatalf("%d records after Stop's timers", n)
	}
}

// Events from many goroutines are all counted, on the real clock: the
// summary comes by itself, from a timer.
func TestConcurrentOnTheRealClock(t *testing.T) {
	logs := &logtest.All{}
	l := lograte.New(slog.New(logs), lograte.Options{Interval: 50 * time.Millisecond})
	t.Cleanup(l.Stop)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 1250 {
				l.Log(context.Background(), slog.LevelError, unavailable, "binary request failed", "goroutine", g)
			}
		})
	}
	wg.Wait()
	waitfor.True(t, "the summaries to account for every event", 10*time.Second, func() bool {
		return counted(t, logs.Records()) == 10_000
	})
	if n := len(logs.Records()); n > 20 {
		t.Errorf("%d records for 10,000 events", n)
	}
}

// Levels the logger leaves out cost nothing and log nothing.
func TestDisabledLevel(t *testing.T) {
	logs := &logtest.Errors{}
	l := lograte.New(slog.New(logs), lograte.Options{})
	t.Cleanup(l.Stop)
	l.Log(context.Background(), slog.LevelInfo, unavailable, "not ready")
	if n := len(logs.Records()); n != 0 {
		t.Fatalf("%d records at info for an ERROR-only logger", n)
	}
}
