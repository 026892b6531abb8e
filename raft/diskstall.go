package raft

import (
	"sync"
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
//     their leases;
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

// diskStall is what the log writer records for stall detection. It is
// safe for concurrent use.
type diskStall struct {
	mu sync.Mutex
	// writing: when the write in progress started (zero: none).
	writing time.Time
	// counted: the write in progress was already counted as a stall.
	counted bool
	// until: the disk counts as stalled until then (monotonic clock).
	until time.Time
}

// beginLogWrite records that a log write starts at now.
func (s *Store) beginLogWrite(now time.Time) {
	s.stall.mu.Lock()
	s.stall.writing, s.stall.counted = now, false
	s.stall.mu.Unlock()
}

// endLogWrite records that the log write in progress ended at now.
func (s *Store) endLogWrite(now time.Time) {
	thr := s.cfg.DiskStallThreshold
	s.stall.mu.Lock()
	defer s.stall.mu.Unlock()
	if thr > 0 && now.Sub(s.stall.writing) > thr {
		if !s.stall.counted {
			s.metrics.diskStalls.Inc()
		}
		s.stall.until = now.Add(stallHoldTimeouts * s.cfg.electionTimeout())
	}
	s.stall.writing, s.stall.counted = time.Time{}, false
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
	s.stall.mu.Lock()
	defer s.stall.mu.Unlock()
	if !s.stall.writing.IsZero() && now.Sub(s.stall.writing) > thr {
		if !s.stall.counted {
			s.stall.counted = true
			s.metrics.diskStalls.Inc()
			s.cfg.Logger.Warn("Raft log write stalled: shedding leadership and leases",
				"waiting", now.Sub(s.stall.writing).Round(time.Millisecond), "threshold", thr)
		}
		return true
	}
	return now.Before(s.stall.until)
}

// shedForStallLocked is the leader's part on a stalled disk: drop the
// lease, and at most once per election timeout ask Raft to transfer the
// leadership to the most up-to-date voter that is recently active.
// REQUIRES: raftMu; the replica leads its range.
func (r *Replica) shedForStallLocked(now time.Time) {
	r.mu.Lock()
	r.mu.leaseExpiry = time.Time{}
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
