package store

import (
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/internal/damage"
)

// blobReadError is a stored blob that cannot be read, named with the
// damaged bytes that hold it (damage.PackReadError).
func (e *Engine) blobReadError(err error, h ident.Hash, what string) error {
	return damage.PackReadError(err, h, what, e.blobs.Holes(), blobDir(e.opts.Dir))
}
