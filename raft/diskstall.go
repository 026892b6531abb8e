package raft

import (
	"sync/atomic"
	"time"

	etcdraft "go.etcd.io/raft/v3"
)

// A leader on a stalled disk hands its leadership away (docs/replication.md,
// "A stalled disk").
//
// The log writer persists appends beside the processing rounds, so a
// leader whose fsync hangs keeps sending heartbeats and appends: its
// followers commit without it, it keeps its lease (a quorum still
// confirms it), and nobody elects anyone else. But it applies nothing it
// has not made durable itself, so every write and lease read it serves
// waits for its disk. So when a log write has taken longer than
// Config.DiskStallThreshold (noticed on the tick, while the write still
// hangs), the node counts its disk as stalled, and until
// stallHoldTimeouts election timeouts after the last slow write ends:
//
//   - its leaders stop serving lease reads and stop extending or renewing
//     their leases, and the reads waiting to apply on them fail at once
//     (read.go waitAppliedFor) so that they go to the next leader;
//   - each of its leaders asks Raft, once per election timeout, to transfer
//     leadership to the most up-to-date active voter (followers get their
//     appends from the leader whatever its own disk does, so one is
//     normally caught up and takes over within a heartbeat or two);
//   - a replica that becomes leader meanwhile (it cannot while its log
//     write hangs: its own vote waits for that write, but it can between
//     two slow writes) hands the leadership on again at its next tick.
//
// Safety does not depend on any of this: a transfer is Raft's own, and
// dropping a lease only sends reads through a ReadIndex round.

// minDiskStallThreshold is the smallest default DiskStallThreshold.
const minDiskStallThreshold = 500 * time.Millisecond

// stallHoldTimeouts is how many election timeouts after its last slow
// write a disk still counts as stalled: a disk that is slow on every write
// has a short gap between two writes, in which its node must not take
// leadership back.
const stallHoldTimeouts = 2

// diskStall is what the log writer records for stall detection. Every
// read asks it (a leader on a stalled disk uses no lease), so it is
// lock-free: times are nanoseconds since base, on the Store's clock (its
// monotonic reading, for the wall clock).
type diskStall struct {
	base time.Time
	// writing: when the write in progress started, plus one (0: none).
	writing atomic.Int64
	// counted: the write in progress was already counted as a stall.
	counted atomic.Bool
	// until: the disk counts as stalled until then.
	until atomic.Int64
}

func (d *diskStall) since(now time.Time) int64 { return int64(now.Sub(d.base)) }

// beginLogWrite records that a log write starts at now.
func (s *Store) beginLogWrite(now time.Time) {
	s.stall.counted.Store(false)
	s.stall.writing.Store(s.stall.since(now) + 1)
}

// endLogWrite records that the log write in progress ended at now.
func (s *Store) endLogWrite(now time.Time) {
	thr := s.cfg.DiskStallThreshold
	t := s.stall.since(now)
	if w := s.stall.writing.Swap(0); w != 0 && thr > 0 && t-(w-1) > int64(thr) {
		if s.stall.counted.CompareAndSwap(false, true) {
			s.metrics.diskStalls.Inc()
		}
		s.stall.until.Store(t + int64(stallHoldTimeouts*s.cfg.electionTimeout()))
	}
}

// DiskStalled reports whether this node's disk counts as stalled at now: a
// log write in progress for longer than Config.DiskStallThreshold, or one
// that took that long ended less than stallHoldTimeouts election timeouts
// ago.
func (s *Store) DiskStalled(now time.Time) bool {
	thr := s.cfg.DiskStallThreshold
	if thr <= 0 {
		return false
	}
	t := s.stall.since(now)
	if w := s.stall.writing.Load(); w != 0 && t-(w-1) > int64(thr) {
		if s.stall.counted.CompareAndSwap(false, true) {
			s.metrics.diskStalls.Inc()
			s.cfg.Logger.Warn("Raft log write stalled: shedding leadership and leases",
				"waiting", time.Duration(t-(w-1)).Round(time.Millisecond), "threshold", thr)
		}
		return true
	}
	return t < s.stall.until.Load()
}

// shedForStallLocked is the leader's part on a stalled disk: drop the
// lease, and at most once per election timeout ask Raft to transfer the
// leadership to the most up-to-date voter that is recently active.
// REQUIRES: raftMu; the replica leads its range.
func (r *Replica) shedForStallLocked(now time.Time) {
	r.mu.Lock()
	r.mu.leaseExpiry = time.Time{}
	r.failStalledReadsLocked()
	r.mu.Unlock()
	if !r.lastStallShed.IsZero() && now.Sub(r.lastStallShed) < r.store.cfg.electionTimeout() {
		return
	}
	st := r.rn.Status()
	if st.RaftState != etcdraft.StateLeader || st.LeadTransferee != 0 {
		return
	}
	var target, best uint64
	for id, pr := range st.Progress {
		if id == r.replicaID || pr.IsLearner || !pr.RecentActive {
			continue
		}
		if target == 0 || pr.Match > best || (pr.Match == best && id < target) {
			target, best = id, pr.Match
		}
	}
	if target == 0 {
		return
	}
	r.lastStallShed = now
	r.store.metrics.stallTransfers.Inc()
	r.store.cfg.Logger.Warn("disk stalled: transferring leadership", "range", r.rangeID,
		"replica", r.replicaID, "to_replica", target, "its_match", best, "commit", st.Commit)
	r.rn.TransferLeader(target)
}
