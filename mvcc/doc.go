// Package mvcc lays versioned values out in the engine and reads them at a
// timestamp: every write of a user key adds a version (an hlc.Timestamp)
// instead of replacing the value, so the key's history stays readable "as
// of" any time above the GC threshold.
//
// Keys: a versioned key is the user key, escaped so that no encoded key is
// a prefix of another, followed by a 13-byte version suffix whose last
// byte is its own length (key.go, docs/formats.md). Byte order of versioned
// keys is (user key ascending, version descending), so the engine's plain
// byte order keeps a key's versions together, newest first, and the
// engine's SplitVersionSuffix option filters point reads on the user key.
//
// Values: each version holds either a live value, with the version that
// created the key (the first version after its last deletion), or a
// deletion tombstone (value.go).
//
// A Keyspace names where versioned keys live in an engine (their engine
// key prefix) and does the work: reads at a timestamp (Get, Scan) over
// anything that makes storage iterators (a storage.DB or Snapshot), writes
// into a storage.Batch through a Writer (which refuses to write at or
// below an existing version, so history never changes under a reader), and
// garbage collection of versions below a threshold (GC), and reads of
// history as changes (History; a Writer reports the same as it writes,
// Writer.OnChange), for watches (docs/watch.md). Writes and GC
// report how they change the keyspace's Stats (live keys and bytes, all
// versions), which ComputeStats recomputes from the data.
//
// This package knows nothing of ranges, Raft or transactions; the range
// state machine calls it (docs/versions.md).
package mvcc
