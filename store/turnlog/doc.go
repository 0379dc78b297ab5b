// Package turnlog is an append-only log of fixed-size turn records in one
// file, turns.log.
//
// # Format
//
// The log is a sequence of 128-byte records, little-endian, with no file
// header, kept in segments (package segment, Options.SegmentSize) of which
// turns.log is the first. Each segment's records start at its first
// offset, 128 bytes apart; a compaction's rewrite of a sealed segment
// holds fewer records than its range has room for, and the rest of the
// range is a gap (package compact). A record:
//
//	turn_id:u64 @0 | parent_turn_id:u64 @8 | context_id:u64 @16
//	| depth:u32 @24 | tenant:u32 @28 | type_ref:u32 @32 | type_version:u32 @36
//	| encoding:u32 @40 | compression:u32 @44 | uncompressed_len:u32 @48
//	| flags:u32 @52 | created_at_unix_ms:u64 @56 | payload_hash:[32] @64
//	| reserved:[28] (0) @96 | crc32:u32 @124 (CRC-32C over bytes 0..124)
//
// Writers zero the reserved bytes; readers check them only through the CRC.
//
// # Crash assumptions
//
// There is a single writer (Append and Truncate are serialized). Append
// writes a whole batch with one write and makes it durable with one
// fdatasync before it returns and before ReadAt or Size see it; a crash
// can therefore only leave a partial batch at the end of the file, never
// damage below the last Append that returned. Truncate fsyncs too. The
// caller records how far the log is committed (MinValidSize) next to its
// facts, and what lies past that is uncommitted.
//
// With Options.Reserve the file keeps zeros written ahead of its last
// record (see syncfile.Reserve), so that an Append's fdatasync flushes data
// only. A file is then records, then zeros.
//
// Open reads and CRC-checks every record up to the first partial or bad
// one, then:
//
//   - zeros from there to the end of the file: the reservation, kept; not
//     a torn tail.
//   - torn record (a partial record, a bad CRC, or any non-zero byte among
//     the zeros after it) at offset X >=
//     Options.MinValidSize: the file is truncated at X, dropping it and
//     everything after it, and fsynced. Recovery reports the bytes cut.
//   - corrupt byte below Options.MinValidSize (or a file shorter than it):
//     Open fails with ErrCorrupt and leaves the file untouched, since
//     committed records would be lost; the operator must decide.
//   - verified but uncommitted records: cut at Options.TruncateAt if set.
//   - missing file: created empty, and its directory fsynced.
//
// Open also takes an exclusive flock on the file (on Linux), so a second
// process cannot write the same log.
package turnlog
