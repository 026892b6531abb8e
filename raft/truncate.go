package raft

import (
	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"

	"github.com/shaledb/shale/storage"
)

// Log truncation (docs/replication.md, "Log truncation").
//
// Each replica truncates its own log (the log is node-local state): one
// DeleteRange of the prefix and the new truncated state, in one batch,
// never past the applied index. A leader keeps the entries its followers
// still need, so that they catch up from the log; but once the log passes
// LogMaxEntries or LogMaxBytes it truncates up to its applied index
// anyway, and a follower left behind gets a snapshot instead. A follower
// being sent a snapshot needs the entries after the snapshot's index: the
// leader keeps those. Followers truncate up to their applied index.
//
// Two rules this replaced made a bulk load copy whole ranges over and
// over. A follower that had not answered for an election timeout (Raft's
// RecentActive) did not hold the log back; on two cores shared by three
// nodes a follower starved of CPU for a second lost that status, and with
// the byte rule below the leader truncated what it needed within the
// second. And a follower being sent a snapshot held nothing back, so
// while a range of 700,000 keys streamed for three seconds the leader
// truncated past the snapshot's index, and the follower, once it had
// applied it, needed another: six snapshots in a row, a collapse of the
// load's throughput to a fifth each time (measured in the commit "raft:
// splits and lagging followers no longer copy whole ranges").
//
// Truncations smaller than LogTruncateMinEntries are not worth a range
// deletion and wait, unless they free LogTruncateMinBytes.
//
// The log lives in the engine beside the data. An entry deleted while it
// is still in the memtable is dropped by the flush (the range deletion
// covers it) and never written to a table file; one that outlives a flush
// is written, then compacted, level by level, until the deletion reaches
// it. A count alone lets large entries outlive flushes: a bulk load's
// 1,000-key batches make entries of about 116 KB, so 1,000 of them are
// 116 MB of log, several memtables' worth, and its flushes and compactions
// carried the log along with the data. Truncating once that many bytes can
// go (LogTruncateMinBytes, 4 MiB, well under a memtable) keeps such
// entries in the memtable; small entries still wait for the count, so a
// busy range of single puts does not add a range deletion every few
// milliseconds.
//
// The memtable is shared by every range's log, so a bound per log is not
// enough: a bulk load over 20 ranges, each log waiting for its own 4 MiB,
// held some 80 MiB of log, five 16 MiB memtables' worth, and its entries
// were flushed and compacted again. So the store sums its logs (Store.
// logBytes, kept by each replica as its log changes), and while the sum
// is over LogBudgetBytes any log truncates once LogTruncateFloorBytes of
// it can go.

// maybeTruncateLocked truncates the log if the policy above allows enough.
// REQUIRES: raftMu.
func (r *Replica) maybeTruncateLocked() error {
	cfg := &r.store.cfg
	first := r.ls.Truncated().Index + 1
	applied := r.ls.Applied().Index
	r.countLogBytesLocked()
	overBudget := r.store.logBytes.Load() > cfg.LogBudgetBytes
	// enough reports whether truncating up to idx is worth a range
	// deletion: LogTruncateMinEntries entries, or about
	// LogTruncateMinBytes (the log's bytes pro rata: entries of one log
	// are of a kind), or LogTruncateFloorBytes while the logs together
	// are over LogBudgetBytes.
	enough := func(idx uint64) bool {
		if idx < first {
			return false
		}
		n := r.ls.Last().Index - first + 1
		est := float64(r.ls.LogBytes()) * float64(idx-first+1) / float64(n)
		return idx >= first+cfg.LogTruncateMinEntries || est >= float64(cfg.LogTruncateMinBytes) ||
			(overBudget && est >= float64(cfg.LogTruncateFloorBytes))
	}
	if !enough(applied) {
		return nil
	}
	idx := applied
	n := r.ls.Last().Index - r.ls.Truncated().Index
	overCap := n > cfg.LogMaxEntries || r.ls.LogBytes() > cfg.LogMaxBytes
	if !overCap && r.rn.BasicStatus().RaftState == etcdraft.StateLeader {
		r.rn.WithProgress(func(id uint64, _ etcdraft.ProgressType, pr tracker.Progress) {
			if id == r.replicaID {
				return
			}
			keep := pr.Match
			if pr.State == tracker.StateSnapshot {
				// It goes on from the log after the snapshot's index.
				keep = max(keep, pr.PendingSnapshot)
			}
			idx = min(idx, keep)
		})
	}
	if !enough(idx) {
		return nil
	}
	b := storage.NewBatch(128)
	t, ok, err := r.ls.StageTruncate(b, idx)
	if err != nil || !ok {
		return err
	}
	// No fsync: losing a truncation only leaves a longer log, and the
	// engine's WAL is ordered, so it can never outlive the applied state
	// written before it.
	if err := r.store.writeEngine(b, storage.WriteOptions{}); err != nil {
		return err
	}
	r.ls.CommitTruncate(t)
	r.countLogBytesLocked()
	r.store.metrics.logTruncations.Inc()
	return nil
}

// countLogBytesLocked brings the store's sum of its logs up to date with
// this replica's log.
// REQUIRES: raftMu.
func (r *Replica) countLogBytesLocked() {
	cur := r.ls.LogBytes()
	r.store.logBytes.Add(cur - r.logBytesCounted)
	r.logBytesCounted = cur
}

// uncountLogBytesLocked takes a replica leaving the store out of the sum.
// REQUIRES: raftMu.
func (r *Replica) uncountLogBytesLocked() {
	r.store.logBytes.Add(-r.logBytesCounted)
	r.logBytesCounted = 0
}
