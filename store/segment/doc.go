// Package segment keeps one append-only stream of records (the blob pack,
// the turn log) in a sequence of bounded files, its segments, that share
// one logical offset space.
//
// A segment holds the stream's bytes [Start, Start+length). Its file is
// named by its first logical offset and a generation: base.<start in 16
// hex digits>.<generation>, for example blobs.pack.0000000010000000.0;
// the segment at offset 0 of generation 0 is base itself (blobs.pack), so
// that a stream of one segment is the single file earlier versions wrote,
// and a store written by them is a stream of one segment as it is, with
// no file to rename on upgrade. Offsets are logical everywhere above this
// package: an index entry, a committed end or a hole names a position in
// the stream, and Set.ReadAt finds the segment that holds it.
//
// Only the last segment, the active one, is written. A write that would
// take a non-empty active segment past Options.MaxSize rolls over first:
// the active segment's reservation of zeros is cut and fsynced, so that
// its file holds exactly its bytes, then the next segment's file is
// created, named by the offset the write starts at, and the directory
// fsynced. A segment other than the last is closed: its length is its
// file's size, and the next segment starts where it ends. Rolling over
// costs a truncate and two fsyncs once per segment; every other write is
// one write and one fdatasync, as before.
//
// Sealing a closed segment (recording its length and BLAKE3 next to the
// facts, once everything in it is committed) is the caller's: this
// package names and reads the files, and says which are closed. A closed
// segment is changed by this package only by Truncate, which a caller
// uses to cut records that never committed, and which therefore never
// reaches a sealed one, and by Replace, which puts a compaction's rewrite
// (the next generation, written and fsynced by the caller) in its place.
// A rewrite keeps its segment's range but packs its records at the start
// of it: it may end before the next segment starts, and the rest of the
// range is a gap that holds nothing (reads there fail with ErrGap). A
// generation-0 segment must end exactly where the next one starts.
//
// # Crash cases
//
//   - A crash while rolling over leaves either the old last segment with
//     its reservation (the rollover did not start), the old segment cut
//     to its bytes and no new file (the next write rolls over again), or
//     both files, the new one empty or holding a torn first write: the
//     caller's recovery treats the last segment as it treated the single
//     file, and a torn write there is cut.
//   - Truncate removes whole segments from the last one down, fsyncing
//     the directory, before it cuts the segment that holds the new end:
//     a crash in between leaves a shorter stream of contiguous segments,
//     which the caller's recovery cuts again.
//   - Open refuses a stream whose segments are not contiguous (a file
//     missing between two others, or a closed segment whose size is not
//     the distance to the next): bytes below a later segment were lost,
//     and nothing is cut or renamed.
package segment
