package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cardboxhq/cardbox/store/blobpack"
)

// maxLoggedDamagedTurns bounds how many damaged turns are remembered as
// logged; past it, damaged turns are still served and counted, not
// logged.
const maxLoggedDamagedTurns = 4096

// damagedTurns counts the turns Last and Before served without their
// payload because its blob cannot be read, and remembers which of them
// were logged: each is logged once, not once per read.
type damagedTurns struct {
	served atomic.Int64

	mu     sync.Mutex
	logged map[uint64]struct{}
	full   bool // maxLoggedDamagedTurns reached, and said so
}

// first reports whether turn id is served damaged for the first time,
// and whether this is the first turn past the logging cap.
func (d *damagedTurns) first(id uint64) (first, capped bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.logged[id]; ok {
		return false, false
	}
	if len(d.logged) >= maxLoggedDamagedTurns {
		capped, d.full = !d.full, true
		return false, capped
	}
	if d.logged == nil {
		d.logged = map[uint64]struct{}{}
	}
	d.logged[id] = struct{}{}
	return true, false
}

// payloadUnreadable reports whether a payload read failed because the
// payload's bytes are damaged or gone (a committed turn's blob is missing
// from the pack only when it lies in a damaged region the index no longer
// describes), rather than for a reason of the moment (the store closing,
// an I/O error).
func payloadUnreadable(err error) bool {
	return errors.Is(err, blobpack.ErrDamaged) || errors.Is(err, blobpack.ErrNotFound)
}

// servedDamaged counts turn id, served without its unreadable payload
// (err is why), and logs it at WARN the first time.
func (e *Engine) servedDamaged(id uint64, m *turnMeta, err error) {
	e.damaged.served.Add(1)
	first, capped := e.damaged.first(id)
	switch {
	case first:
		attrs := []any{"turn", id, "blob", fmt.Sprintf("%x", m.hash), "advice", adviceVerify}
		var d *blobpack.DamageError
		if errors.As(err, &d) {
			attrs = append(attrs, "damaged_from", d.Offset, "damaged_to", d.End, "reason", d.Reason)
		} else {
			attrs = append(attrs, "reason", "blob not in the blob pack: presumably in a damaged region its index no longer describes")
		}
		e.log.Warn("turn served without its payload, which lies in a damaged record of the blob pack; "+
			"the window's other turns are served whole", attrs...)
	case capped:
		e.log.Warn("more turns served without their damaged payloads: no longer logged one by one, still counted",
			"logged", maxLoggedDamagedTurns, "metric", "cardbox_damaged_turns_served_total", "advice", adviceVerify)
	}
}
