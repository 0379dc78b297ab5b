package damage

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/blobpack"
)

// CrossCheck tallies the start-up check that every committed turn's
// payload and every attached fs root is in the pack, or in a hole the
// pack reported. A blob missing for no such reason means the pack is not
// the one the turns were written to (or lost records wholesale): the
// store refuses to start.
type CrossCheck struct {
	// Has is the pack's blobpack.Pack.Has.
	Has func(ident.Hash) error
	// Lost receives the missing payloads of turns, by tenant.
	Lost *Lost

	missing, damaged int
	first            string
}

// Note checks blob h; tenant is the tenant of the turn whose payload it
// is, 0 for an fs root (whose tenant is not known here). what describes
// the blob, asked only for the first missing one: formatting it for
// each of millions of turns was a noticeable part of a start.
func (c *CrossCheck) Note(h ident.Hash, tenant uint32, what func() string) {
	err := c.Has(h)
	switch {
	case err == nil:
	case errors.Is(err, blobpack.ErrDamaged):
		c.damaged++
	default:
		if c.missing++; c.missing == 1 {
			c.first = fmt.Sprintf("%s, blob %x", what(), h)
		}
		if tenant != 0 {
			c.Lost.Add(tenant, h)
		}
	}
}

// Verdict logs what is damaged and refuses, with an error, blobs missing
// from the pack in dir when none of its holes may hold them.
func (c *CrossCheck) Verdict(log *slog.Logger, holes []blobpack.Hole, dir string) error {
	unidentified := 0
	for _, h := range holes {
		if !h.HashKnown {
			unidentified++
		}
	}
	if c.damaged > 0 {
		log.Error("blob pack: committed blobs lie in damaged records; reading them fails", "blobs", c.damaged, "advice", AdviceVerify)
	}
	if c.missing == 0 {
		return nil
	}
	if unidentified > 0 {
		log.Error("blob pack: committed blobs are missing, presumably in damaged regions the index no longer describes",
			"blobs", c.missing, "holes", unidentified, "first", c.first, "advice", AdviceVerify)
		return nil
	}
	return fmt.Errorf("%d committed blobs are neither in %s nor in a damaged record (first: %s): "+
		"refusing to start; %s, and %s", c.missing, dir, c.first, AdviceVerify, AdviceBackup)
}
