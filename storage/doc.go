// Package storage is the Go binding of Shale's C++ LSM engine (engine-c),
// and the only package of the module that uses cgo.
//
// # Shape
//
// A cgo call costs tens of nanoseconds plus scheduler work, an in-memory
// engine operation a few hundred, so the binding crosses the boundary as
// rarely as it can:
//
//   - Writes: a Batch is built in Go, byte for byte in the engine's
//     WriteBatch format, and DB.Write hands the whole buffer over in one
//     call.
//   - Point reads: DB.Get is one call that copies the value into a Go
//     buffer (retrying with the exact size when it does not fit);
//     DB.MultiGet reads N keys in one call at one consistent point.
//   - Scans: an Iterator copies a window of many entries per call and walks
//     it in Go; Next does not cross the boundary.
//
// # Memory
//
// Go memory is passed to C only for the duration of a call (the cgo pointer
// rules): the engine copies whatever it keeps. Nothing the binding returns
// points into C memory. Iterator.UnsafeKey and UnsafeValue alias the
// iterator's Go buffer and are valid until its next positioning call; every
// other returned slice belongs to the caller.
//
// # Concurrency and lifetime
//
// DB and Snapshot are safe for concurrent use; Batch, Iterator and
// SSTWriter are not. DB.Close fails with ErrBusy while iterators or
// snapshots are open (the engine cannot free itself under them), and any
// other call after Close fails with ErrClosed: closing never crashes.
//
// # Errors
//
// Engine failures are *EngineError values that match one sentinel
// (ErrNotFound, ErrCorruption, ErrIO, ErrNoSpace, ErrInvalidArgument,
// ErrClosed, ErrBusy, ...) with errors.Is and keep the engine's message.
//
// # The WriteBatch format
//
// A batch's bytes are what the engine's WAL stores, and a WAL written by one
// version is replayed by the next after a crash or an upgrade, so the
// format is versioned and frozen (format version 1; docs/formats.md; Raft
// entries carry commands, not batches):
//
//	batch     := header record*
//	header    := sequence: fixed64   (zero when built in Go; the engine assigns)
//	             count:    fixed32   (number of records)
//	record    := 0x00 varstring             -- Delete(key)
//	           | 0x01 varstring varstring   -- Put(key, value)
//	           | 0x02 varstring varstring   -- DeleteRange(start, end), end exclusive
//	varstring := len: varint32, bytes[len]
//
// Fixed-width integers are little-endian; varint32 is LEB128 (at most 5
// bytes). The records of a batch apply atomically and in order. An unknown
// tag is corruption; a new kind of record would get a new tag, never a new
// meaning for an old one. BatchReader decodes batches for tools, tests and
// log replay.
//
// # Linking
//
// The engine is the static library build/engine/libshale_engine.a, built by
// `make engine`. Build through make: the go command does not notice when a
// C library changes, and the Makefile stamps the link with the library's
// digest (EngineStamp) so binaries are relinked when the engine changes.
package storage
