package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/internal/memindex"
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
func (e *Engine) servedDamaged(id uint64, m *memindex.TurnMeta, err error) {
	e.damaged.served.Add(1)
	first, capped := e.damaged.first(id)
	switch {
	case first:
		attrs := []any{"turn", id, "blob", fmt.Sprintf("%x", m.Hash), "advice", adviceVerify}
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

// lostBlobs are the committed turns' payloads that recovery found missing
// from the blob pack while the pack has holes whose blobs are unknown (a
// region found damaged by scanning, when blobs.idx was lost or cut): each
// presumably lies in one of those holes. They are remembered by the
// tenant whose turn names them, the one thing that tells such a blob,
// stored and unreadable, from one never stored when the pack cannot say
// who stored it first (a tenant that stored it after the first one holds
// a claim in tenant_blobs, which ownsBlob asks anyway). Written by
// recovery only, read-only once the store is open.
type lostBlobs map[lostBlob]struct{}

type lostBlob struct {
	tenant uint32
	hash   ident.Hash
}

func (l *lostBlobs) add(tenant uint32, h ident.Hash) {
	if *l == nil {
		*l = lostBlobs{}
	}
	(*l)[lostBlob{tenant, h}] = struct{}{}
}

// of reports whether a committed turn of tenant names blob h, which the
// pack lost.
func (l lostBlobs) of(tenant uint32, h ident.Hash) bool {
	_, ok := l[lostBlob{tenant, h}]
	return ok
}

// blobReadError is a stored blob that cannot be read: an internal error
// naming it and, when its record is damaged, the damaged bytes (also in
// the error's details). A blob missing from the pack altogether, though
// stored (a claim or a committed turn names it), lies in a hole whose blob
// is unknown: the one there is when there is one.
func (e *Engine) blobReadError(err error, h ident.Hash, what string) error {
	if !errors.Is(err, blobpack.ErrNotFound) {
		return blobReadError(err, h, what)
	}
	var unknown []blobpack.Hole
	for _, hole := range e.blobs.Holes() {
		if !hole.HashKnown {
			unknown = append(unknown, hole)
		}
	}
	var se *fault.Error
	switch len(unknown) {
	case 0:
		se = fault.Wrap(fault.Internal, err, "%s %x was stored but is missing from the blob pack, which has no damaged region to hold it "+
			"(is %s the pack it was stored in?); %s", what, h, blobDir(e.opts.Dir), adviceVerify)
		se.Details = map[string]any{"blob": fmt.Sprintf("%x", h)}
	case 1:
		hole := unknown[0]
		se = fault.Wrap(fault.Internal, err, "%s %x lies in a damaged region of the blob pack that its index no longer describes "+
			"(bytes %d..%d of %s: %s); run `cardbox verify`", what, h, hole.Offset, hole.End, blobpack.PackFile, hole.Reason)
		se.Details = map[string]any{"blob": fmt.Sprintf("%x", h), "damaged_from": hole.Offset, "damaged_to": hole.End}
	default:
		se = fault.Wrap(fault.Internal, err, "%s %x lies in one of the %d damaged regions of the blob pack that its index no longer describes "+
			"(the first at bytes %d..%d of %s); run `cardbox verify` to list them", what, h, len(unknown),
			unknown[0].Offset, unknown[0].End, blobpack.PackFile)
		se.Details = map[string]any{"blob": fmt.Sprintf("%x", h), "damaged_regions": len(unknown)}
	}
	return se
}
