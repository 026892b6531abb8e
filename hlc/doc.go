// Package hlc holds Shale's timestamps: hybrid-logical clock readings, a
// wall time in Unix nanoseconds plus a logical counter that orders events
// within one nanosecond, and the Clock that issues them.
//
// A Timestamp is the version of every value (package mvcc) and the unit of
// every time-based promise (closed timestamps, GC thresholds). The cluster
// draws its timestamps from one timestamp oracle (docs/versions.md); the
// oracle issues them from a Clock, and every node keeps a Clock that it
// moves forward with each timestamp it receives, so that it never issues,
// closes or judges staleness with a time below one it has seen.
//
// A Clock never goes backwards, whatever its physical clock does, and it
// refuses a remote reading that is farther ahead of its own physical clock
// than the maximum clock offset: adopting such a reading would drag every
// later timestamp of the node (and of whoever it talks to) into a future
// that the rest of the cluster has not reached. The refusal is an
// *OffsetError, which the caller reports (log, metric) and answers by not
// serving. The physical clock is injectable (PhysicalClock) so that tests
// and the deterministic simulator control time; raft.Clock satisfies it.
//
// An OffsetMonitor keeps each peer's clock offset as measured on round
// trips (MeasureOffset) and says when the local clock is beyond the
// tolerated offset from a majority of its peers: the other condition on
// which a node stops serving.
//
// Timestamps encode to 12 bytes whose byte order is timestamp order
// (Encode), the form stored in versioned keys.
//
// This package uses the standard library only.
package hlc
