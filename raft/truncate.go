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
// never past the applied index. A leader keeps the entries its active
// followers still need, so that they catch up from the log; but once the
// log passes LogMaxEntries or LogMaxBytes it truncates up to its applied
// index anyway, and a follower left behind gets a snapshot instead. A
// follower that has not answered for an election timeout (Raft's
// RecentActive) does not hold the log back: it will need a snapshot to
// catch up in all likelihood. Followers truncate up to their applied
// index. Truncations smaller than LogTruncateMinEntries are not worth a
// range deletion and wait, unless they free LogTruncateMinBytes.
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

// maybeTruncateLocked truncates the log if the policy above allows enough.
// REQUIRES: raftMu.
func (r *Replica) maybeTruncateLocked() error {
	cfg := &r.store.cfg
	first := r.ls.Truncated().Index + 1
	applied := r.ls.Applied().Index
	// enough reports whether truncating up to idx is worth a range
	// deletion: LogTruncateMinEntries entries, or about
	// LogTruncateMinBytes (the log's bytes pro rata: entries of one log
	// are of a kind).
	enough := func(idx uint64) bool {
		if idx < first {
			return false
		}
		n := r.ls.Last().Index - first + 1
		est := float64(r.ls.LogBytes()) * float64(idx-first+1) / float64(n)
		return idx >= first+cfg.LogTruncateMinEntries || est >= float64(cfg.LogTruncateMinBytes)
	}
	if !enough(applied) {
		return nil
	}
	idx := applied
	n := r.ls.Last().Index - r.ls.Truncated().Index
	overCap := n > cfg.LogMaxEntries || r.ls.LogBytes() > cfg.LogMaxBytes
	if !overCap && r.rn.BasicStatus().RaftState == etcdraft.StateLeader {
		r.rn.WithProgress(func(id uint64, _ etcdraft.ProgressType, pr tracker.Progress) {
			if id == r.replicaID || !pr.RecentActive || pr.State == tracker.StateSnapshot {
				return
			}
			if pr.Match < idx {
				idx = pr.Match
			}
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
	if err := r.store.cfg.Engine.Write(b, storage.WriteOptions{}); err != nil {
		return err
	}
	r.ls.CommitTruncate(t)
	r.store.metrics.logTruncations.Inc()
	return nil
}
