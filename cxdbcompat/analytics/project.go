// Package analytics keeps the typed payloads of turns in Postgres for SQL
// analytics (docs/analytics.md): each committed turn's projected JSON, the
// same as the HTTP typed view's data with its default render options, in
// table turn_data beside the turn's row.
//
// The Projector does it off the append path: the store's OnAppend hook
// queues committed turns (never blocking; a full queue drops them), and a
// goroutine projects them in batches written with one statement each.
// Catch-up, at start and after a drop or a failure, finds every turn
// without a turn_data row from a durable per-tenant watermark, so a crash
// never leaves a turn unprojected for good. Backfill re-projects what a
// newly published bundle changes.
package analytics

import (
	"bytes"
	"unicode/utf8"

	"github.com/cardboxhq/cardbox/cxdbcompat/projection"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// Why a turn has no data. The values are turn_data.skipped's.
const (
	// SkipTooLarge: the payload is larger than the projector's cap.
	SkipTooLarge = "too_large"
	// SkipUnknownType: the tenant's registry has no descriptor for the
	// declared type and version.
	SkipUnknownType = "unknown_type"
	// SkipUndecodable: the payload does not decode through its descriptor.
	SkipUndecodable = "undecodable"
	// SkipUnreadable: the payload's blob cannot be read (a damaged pack).
	SkipUnreadable = "unreadable"
)

// DefaultMaxPayload is the largest payload projected when no cap is
// configured: larger ones keep only metadata (SkipTooLarge).
const DefaultMaxPayload = 256 << 10

// RenderOptions are the render options of turn_data: the typed view's
// defaults (bytes base64, u64 as strings, enums as labels, times as ISO
// 8601, no unknown fields).
var RenderOptions = projection.Options{}

// Projected is one turn's turn_data: JSON data, or why there is none.
type Projected struct {
	Data    []byte // cleaned JSON; nil when Skipped is set
	Skipped string
}

// Project projects payload as the typed view does for a turn declaring
// typeID and typeVersion (type hint mode inherit, RenderOptions), and
// cleans the JSON for Postgres.
func Project(reg *registry.Registry, typeID string, typeVersion uint32, payload []byte) Projected {
	d, ok := reg.Descriptor(typeID, typeVersion)
	if !ok {
		return Projected{Skipped: SkipUnknownType}
	}
	res, err := projection.Project(payload, d, reg, RenderOptions)
	if err != nil {
		return Projected{Skipped: SkipUndecodable}
	}
	return Projected{Data: CleanJSON(res.Data)}
}

// replacement is U+FFFD, the character cleaning puts in place of what
// Postgres cannot hold.
const replacement = "\uFFFD"

// CleanJSON makes JSON text storable as Postgres jsonb, by the rule of
// docs/cxdb-http.md ("Text cleaning"): each run of invalid UTF-8 becomes
// one U+FFFD, and each NUL (in JSON, the escape \u0000, which jsonb
// refuses) becomes U+FFFD. Anything else is returned as it is; b is
// modified in place only when it has a NUL escape.
func CleanJSON(b []byte) []byte {
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte(replacement))
	}
	if !bytes.Contains(b, []byte(`\u0000`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		// An escape: copy it whole, so that an escaped backslash before
		// "u0000" is not read as the start of another escape.
		if b[i+1] == 'u' && i+6 <= len(b) && string(b[i+2:i+6]) == "0000" {
			out = append(out, `\ufffd`...)
			i += 5
			continue
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}
