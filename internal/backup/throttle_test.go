package backup

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/zeebo/blake3"
	"golang.org/x/time/rate"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/store"
)

// clockLimiter is a rate.Limiter on a clock of its own: WaitN moves the
// clock on by the wait the limiter asks for instead of sleeping, and
// counts what it granted, so that a test measures bytes over time
// without waiting and whatever the machine's load.
type clockLimiter struct {
	mu         sync.Mutex
	lim        *rate.Limiter
	start, now time.Time
	granted    int64
	largest    int
}

func newClockLimiter(bytesPerSecond, burst int) *clockLimiter {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &clockLimiter{lim: rate.NewLimiter(rate.Limit(bytesPerSecond), burst), start: start, now: start}
}

func (c *clockLimiter) Burst() int { return c.lim.Burst() }

func (c *clockLimiter) WaitN(ctx context.Context, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.lim.ReserveN(c.now, n)
	if !r.OK() {
		return fmt.Errorf("asked for %d bytes at once, more than the burst %d", n, c.lim.Burst())
	}
	c.now = c.now.Add(r.DelayFrom(c.now))
	c.granted += int64(n)
	c.largest = max(c.largest, n)
	return nil
}

// The throttle covers the database's dump as well as the files: every
// byte the backup writes, of the dump or of a segment, is first granted
// by one limiter, never more than its burst at once, and over the
// limiter's clock the backup moves no more than the rate allows.
func TestThrottleCoversTheDump(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.NewPoolAndURL(t)
	dir := t.TempDir()
	e, err := store.Open(ctx, store.Options{Dir: dir, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	tenant, err := e.Tenant(ctx, ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.CreateContext(ctx, tenant, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		p := fmt.Appendf(nil, "turn %d of the throttle's test", i)
		if _, err := e.Append(ctx, tenant, &store.AppendRequest{
			ContextID: h.ContextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
			UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
		}); err != nil {
			t.Fatal(err)
		}
	}

	const bytesPerSecond, burst = 32 << 10, 4 << 10
	limit := newClockLimiter(bytesPerSecond, burst)
	m, err := Backup(ctx, Options{DataDir: dir, Dest: filepath.Join(t.TempDir(), "backup"), DatabaseURL: url, limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	written := m.Copied + m.Database.Dump.Size
	if m.Database.Dump.Size < 4*burst {
		t.Fatalf("the dump is %d bytes, too small to show pacing", m.Database.Dump.Size)
	}
	if limit.granted != written {
		t.Fatalf("the limiter granted %d bytes; the backup wrote %d (files %d, dump %d)", limit.granted, written, m.Copied, m.Database.Dump.Size)
	}
	if limit.largest > burst {
		t.Fatalf("%d bytes were asked for at once, more than the burst %d", limit.largest, burst)
	}
	elapsed := limit.now.Sub(limit.start)
	if allowed := int64(math.Ceil(elapsed.Seconds()*bytesPerSecond)) + burst; written > allowed {
		t.Fatalf("%d bytes moved in %v of the limiter's clock, more than the %d its rate allows", written, elapsed, allowed)
	}
	t.Logf("%d bytes (files %d, dump %d) over %v of the limiter's clock at %d bytes/s", written, m.Copied, m.Database.Dump.Size, elapsed, bytesPerSecond)
}
