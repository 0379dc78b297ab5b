// Package blobpack is a content-addressed blob store kept in one
// append-only pack file, with a rebuildable index file beside it.
//
// A blob's key is the BLAKE3-256 of its uncompressed bytes. A blob is
// stored once, zstd-compressed (level 1 under 4 KiB, else level 3) unless it is
// shorter than 128 bytes or zstd does not make it smaller, in which case it
// is stored raw. All lookups are served from an in-memory index (about
// 70 bytes per blob); reads are one pread each. View also keeps recently
// read blobs uncompressed in a bounded cache (Options.CacheBytes), each
// checked against a CRC-32C whenever it is served.
//
// # Files
//
// A pack directory holds two files. All integers are little-endian; CRCs
// are CRC-32C (Castagnoli).
//
// blobs.pack is a sequence of records, kept in segments (package segment,
// Options.SegmentSize): blobs.pack holds the first, and offsets are
// positions in the whole stream. A compaction's rewrite of a segment
// (see compact.go) holds its live records at the start of the segment's
// range; the rest of the range is a gap, which every reader of the
// stream skips. Each record is
//
//	magic:u32 "CBBP" | version:u8 (1) | codec:u8 (0 raw, 1 zstd) | reserved:u16 (0)
//	| owner:u32 | raw_len:u32 | stored_len:u32 | hash:[32]     (52-byte header)
//	| stored bytes (stored_len)
//	| crc32:u32 over header and stored bytes
//
// owner is the tenant of the writer that first stored the blob.
//
// blobs.idx is a sequence of fixed 64-byte entries, one per pack record,
// in pack order:
//
//	hash:[32] | offset:u64 | raw_len:u32 | stored_len:u32 | owner:u32
//	| codec:u8 | pad:[7] (0) | crc32:u32 over the preceding 60 bytes
//
// # Crash assumptions
//
// There is a single writer (Put calls are serialized). A Put appends all
// new records of a batch with one write, fsyncs blobs.pack (fdatasync on
// Linux), and only then makes them visible to readers and appends their
// index entries. A record that a crash can still lose is therefore never
// served, and a blob that Put reported is durable.
//
// blobs.idx is not fsynced on each Put (only on Close and after recovery):
// it is a cache of blobs.pack, which is the source of truth. Every index
// entry is checked against the pack on Open, and everything past the last
// valid entry is found again by scanning the pack, so a lost or torn index
// write costs only a longer scan on the next Open. Because index entries
// are written after the records they describe are fsynced, the index can
// run ahead of the pack only if the pack itself was damaged or replaced.
//
// With Options.Reserve, blobs.pack keeps zeros written ahead of its last
// record (see syncfile.Reserve), so that a Put's fdatasync flushes data
// only. The pack is then records, then zeros; a record header of zeros ends
// the scan below, and if only zeros follow, they are the reservation and
// stay.
//
// Open repairs what a crash or damage leaves behind:
//
//   - missing files: created, and the directory fsynced.
//   - short or corrupt index: entries are loaded while each has a valid CRC,
//     starts where the previous record ended, lies inside the pack, and
//     matches the header of the record it points at; the records in the
//     last MiB of the indexed part (at least the last record) must also
//     pass their own CRC. The index is cut at the first entry that fails;
//     a missing index is an empty one.
//   - index ahead of the pack: entries past the end of the pack, or whose
//     record header disagrees, fail the check above and are cut.
//   - unindexed records: the pack is scanned from the end of the last
//     indexed record; each record whose CRC verifies is indexed and its
//     entry appended to blobs.idx.
//   - bad record (a partial record, a flipped byte, a damaged header): a
//     record that blobs.idx describes but whose header disagrees, or whose
//     CRC fails, is a Hole when it lies below Options.MinValidSize (the
//     committed end): its bytes stay, its blob reads as ErrDamaged, and
//     every later record is indexed as usual. A bad record found by
//     scanning is skipped up to the next record whose magic, header and
//     CRC check (that span is a Hole too). Only bytes after the last valid
//     record, and at or past MinValidSize, are a torn tail: unless they are
//     zeros (the reservation) the pack is truncated there and fsynced. A
//     pack whose valid records end before MinValidSize fails Open with
//     ErrCorrupt and is left untouched.
//
// Before the last MiB, Open reads only the headers of indexed records:
// damaged stored bytes there are found by Read, which checks every
// record's CRC and returns a DamageError wrapping ErrDamaged and
// ErrCorrupt (and by cardbox verify). The record is a Hole from then on
// (Options.OnDamage is told): Lookup no longer returns it, so that a Put
// of the blob writes it again, and the later record of a blob wins when
// Open loads blobs.idx.
package blobpack
