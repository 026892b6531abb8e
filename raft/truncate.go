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
// range deletion and wait.

// maybeTruncateLocked truncates the log if the policy above allows enough.
// REQUIRES: raftMu.
func (r *Replica) maybeTruncateLocked() error {
	cfg := &r.store.cfg
	first := r.ls.Truncated().Index + 1
	applied := r.ls.Applied().Index
	if applied < first+cfg.LogTruncateMinEntries {
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
	if idx < first+cfg.LogTruncateMinEntries {
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
