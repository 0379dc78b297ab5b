// Package damage is what the engine does about committed blobs the blob
// pack cannot serve: it counts and logs the turns served without their
// payload, remembers the payloads recovery found lost, tallies the
// start-up cross-check of turns against the pack, and builds the errors
// that name an unreadable blob and the damaged bytes that hold it.
package damage

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/blobpack"
)

// What to run when the files and the database disagree.
const (
	AdviceVerify = "run `cardbox verify` to list what is damaged or missing"
	AdviceBackup = "restore blobs/ from a backup of this data directory"
)

// maxLogged bounds how many damaged turns are remembered as logged; past
// it, damaged turns are still served and counted, not logged.
const maxLogged = 4096

// Served counts the turns served without their payload because its blob
// cannot be read, and remembers which of them were logged: each is logged
// once, not once per read. The zero value is ready to use.
type Served struct {
	served atomic.Int64

	mu     sync.Mutex
	logged map[uint64]struct{}
	full   bool // maxLogged reached, and said so
}

// Count returns how many damaged turns were served.
func (d *Served) Count() int64 { return d.served.Load() }

// first reports whether turn id is served damaged for the first time,
// and whether this is the first turn past the logging cap.
func (d *Served) first(id uint64) (first, capped bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.logged[id]; ok {
		return false, false
	}
	if len(d.logged) >= maxLogged {
		capped, d.full = !d.full, true
		return false, capped
	}
	if d.logged == nil {
		d.logged = map[uint64]struct{}{}
	}
	d.logged[id] = struct{}{}
	return true, false
}

// Note counts turn id, whose payload is blob h, served without it (err is
// why it is unreadable), and logs it at WARN the first time.
func (d *Served) Note(log *slog.Logger, id uint64, h ident.Hash, err error) {
	d.served.Add(1)
	first, capped := d.first(id)
	switch {
	case first:
		attrs := []any{"turn", id, "blob", fmt.Sprintf("%x", h), "advice", AdviceVerify}
		var de *blobpack.DamageError
		if errors.As(err, &de) {
			attrs = append(attrs, "damaged_from", de.Offset, "damaged_to", de.End, "reason", de.Reason)
		} else {
			attrs = append(attrs, "reason", "blob not in the blob pack: presumably in a damaged region its index no longer describes")
		}
		log.Warn("turn served without its payload, which lies in a damaged record of the blob pack; "+
			"the window's other turns are served whole", attrs...)
	case capped:
		log.Warn("more turns served without their damaged payloads: no longer logged one by one, still counted",
			"logged", maxLogged, "metric", "cardbox_damaged_turns_served_total", "advice", AdviceVerify)
	}
}

// Unreadable reports whether a payload read failed because the payload's
// bytes are damaged or gone (a committed turn's blob is missing from the
// pack only when it lies in a damaged region the index no longer
// describes), rather than for a reason of the moment (the store closing,
// an I/O error).
func Unreadable(err error) bool {
	return errors.Is(err, blobpack.ErrDamaged) || errors.Is(err, blobpack.ErrNotFound)
}

// Lost are the committed turns' payloads that recovery found missing
// from the blob pack while the pack has holes whose blobs are unknown (a
// region found damaged by scanning, when blobs.idx was lost or cut): each
// presumably lies in one of those holes. They are remembered by the
// tenant whose turn names them, the one thing that tells such a blob,
// stored and unreadable, from one never stored when the pack cannot say
// who stored it first (a tenant that stored it after the first one holds
// a claim in tenant_blobs, which is asked anyway). Written by recovery
// only, read-only once the store is open.
type Lost map[lostBlob]struct{}

type lostBlob struct {
	tenant uint32
	hash   ident.Hash
}

// Add records that a committed turn of tenant names blob h, which the
// pack lost.
func (l *Lost) Add(tenant uint32, h ident.Hash) {
	if *l == nil {
		*l = Lost{}
	}
	(*l)[lostBlob{tenant, h}] = struct{}{}
}

// Of reports whether a committed turn of tenant names blob h, which the
// pack lost.
func (l Lost) Of(tenant uint32, h ident.Hash) bool {
	_, ok := l[lostBlob{tenant, h}]
	return ok
}

// ReadError is a stored blob that cannot be read: an internal error
// whose message names the blob and, when its record is damaged, the
// damaged bytes of the pack (also in its details, with the blob).
func ReadError(err error, h ident.Hash, what string) error {
	var d *blobpack.DamageError
	if errors.As(err, &d) {
		e := fault.Wrap(fault.Internal, err, "%s %x lies in a damaged record of the blob pack (bytes %d..%d of %s: %s); run `cardbox verify`",
			what, h, d.Offset, d.End, blobpack.PackFile, d.Reason)
		e.Details = map[string]any{"blob": fmt.Sprintf("%x", h), "damaged_from": d.Offset, "damaged_to": d.End}
		return e
	}
	return fault.Wrap(fault.Internal, err, "read %s %x", what, h)
}

// PackReadError is ReadError for a blob read from the pack in dir, whose
// damaged regions are holes. A blob missing from the pack altogether,
// though stored (a claim or a committed turn names it), lies in a hole
// whose blob is unknown: the one there is when there is one.
func PackReadError(err error, h ident.Hash, what string, holes []blobpack.Hole, dir string) error {
	if !errors.Is(err, blobpack.ErrNotFound) {
		return ReadError(err, h, what)
	}
	var unknown []blobpack.Hole
	for _, hole := range holes {
		if !hole.HashKnown {
			unknown = append(unknown, hole)
		}
	}
	var se *fault.Error
	switch len(unknown) {
	case 0:
		se = fault.Wrap(fault.Internal, err, "%s %x was stored but is missing from the blob pack, which has no damaged region to hold it "+
			"(is %s the pack it was stored in?); %s", what, h, dir, AdviceVerify)
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
