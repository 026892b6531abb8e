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
// waits for its disk. So when a log write has been stuck for longer than
// Config.DiskStallThreshold (noticed on the tick, while the write still
// hangs), the node counts its disk as stalled, and until
// stallHoldTimeouts election timeouts after the last stuck write ends:
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
// Safety does not depend on any of this: a transfer is Raft's, and
// dropping a lease only sends reads through a ReadIndex round.
//
// # A stalled disk, not a busy node
//
// Moving leaders off a disk that is merely slow, or off a node that is
// merely busy, costs an election's worth of unavailability for nothing, so
// the detector counts only what the disk is to blame for:
//
//   - Only the disk's own work is timed: the fsync of the log (SyncWAL),
//     or the synced write of a batch carrying a snapshot. The unsynced
//     append before the fsync is not: it waits for the engine's write queue
//     and, under a heavy write load, for its write stalls (too many L0
//     files, a full memtable), which are the engine keeping up, not the
//     disk hanging; a disk that hangs hangs the fsync that follows.
//   - A write's wait is measured from its start, but only in time the node
//     was seen running: the ticker credits the write in flight with the
//     time since its last look, at most stallCreditTicks ticks at once. A
//     node starved of CPU, paused (SIGSTOP, a VM freeze) or in a long GC
//     pause ticks late, and the time it could not run is not the disk's:
//     a late tick credits only stallCreditTicks ticks, and so does the end
//     of a write after a late wake-up.
//   - The threshold is well above a loaded fsync: the election timeout,
//     and never below minDiskStallThreshold (1 s, the duration at which
//     etcd calls an fdatasync slow; CockroachDB logs a slow disk
//     operation at a few seconds and kills the node at 20 s). A healthy
//     disk under a heavy write load syncs in tens to hundreds of
//     milliseconds; a stalled one does not return at all.
//
// TestDiskStallCountsOnlyTimeTheNodeRan (the accounting) and
// tests/TestClusterDiskLoadIsNoStall (a cluster under a heavy write load
// beside a process that keeps the same disk busy) hold these.

// minDiskStallThreshold is the smallest default DiskStallThreshold.
const minDiskStallThreshold = time.Second

// stallHoldTimeouts is how many election timeouts after its last slow
// write a disk still counts as stalled: a disk that is slow on every write
// has a short gap between two writes, in which its node must not take
// leadership back.
const stallHoldTimeouts = 2

// stallCreditTicks is the most waiting one look of the ticker credits a
// write in flight with, in ticks: a tick later than that means the node
// itself did not run.
const stallCreditTicks = 2

// diskStall is what the log writer and the ticker record for stall
// detection. Every read asks it (a leader on a stalled disk uses no lease),
// so it is lock-free: times are nanoseconds since base, on the Store's
// clock (its monotonic reading, for the wall clock). One goroutine (the
// log writer) begins and ends writes, one (the ticker) observes them.
type diskStall struct {
	base time.Time
	// writing: when the write in flight started, plus one (0: none).
	writing atomic.Int64
	// waited: how long the write in flight has been seen waiting while
	// the node ran (observe).
	waited atomic.Int64
	// seen: when the ticker last looked.
	seen atomic.Int64
	// counted: the write in flight was already counted as a stall.
	counted atomic.Bool
	// until: the disk counts as stalled until then.
	until atomic.Int64
}

func (d *diskStall) since(now time.Time) int64 { return int64(now.Sub(d.base)) }

// begin records that a disk write starts at t.
func (d *diskStall) begin(t int64) {
	d.waited.Store(0)
	d.counted.Store(false)
	d.writing.Store(t + 1)
}

// credit adds to the write in flight (started at w-1) the waiting seen at
// t: the time since the later of its start and the ticker's last look, at
// most maxGap.
func (d *diskStall) credit(t, w, maxGap int64) int64 {
	from := max(d.seen.Load(), w-1)
	return d.waited.Add(min(max(t-from, 0), maxGap))
}

// observe is the ticker's look at t. It reports whether the write in
// flight has now waited longer than thr for the first time.
func (d *diskStall) observe(t, thr, maxGap int64) bool {
	w := d.writing.Load()
	var waited int64
	if w != 0 {
		waited = d.credit(t, w, maxGap)
	}
	d.seen.Store(t)
	return w != 0 && waited > thr && d.counted.CompareAndSwap(false, true)
}

// end records that the write in flight ended at t. It reports whether
// the write counts as a stall (it waited longer than thr, counting what
// the node saw of it since the ticker's last look), in which case the
// disk stays stalled for hold more, and whether it was not counted yet.
func (d *diskStall) end(t, thr, hold, maxGap int64) (stalled, newly bool) {
	w := d.writing.Load()
	if w == 0 {
		return false, false
	}
	waited := d.credit(t, w, maxGap)
	d.writing.Store(0)
	if waited <= thr {
		return false, false
	}
	d.until.Store(t + hold)
	return true, d.counted.CompareAndSwap(false, true)
}

// stalled reports whether the disk counts as stalled at t.
func (d *diskStall) stalled(t, thr int64) bool {
	if d.writing.Load() != 0 && d.waited.Load() > thr {
		return true
	}
	return t < d.until.Load()
}

// stallCredit is the most one look credits, in nanoseconds.
func (s *Store) stallCredit() int64 { return int64(stallCreditTicks * s.cfg.TickInterval) }

// beginLogWrite records that a disk write of the log writer starts at now.
func (s *Store) beginLogWrite(now time.Time) { s.stall.begin(s.stall.since(now)) }

// endLogWrite records that the disk write in flight ended at now.
func (s *Store) endLogWrite(now time.Time) {
	thr := s.cfg.DiskStallThreshold
	if thr <= 0 {
		s.stall.writing.Store(0)
		return
	}
	hold := int64(stallHoldTimeouts * s.cfg.electionTimeout())
	if _, newly := s.stall.end(s.stall.since(now), int64(thr), hold, s.stallCredit()); newly {
		s.metrics.diskStalls.Inc()
	}
}

// observeLogWrite is the ticker's look at the disk write in flight.
func (s *Store) observeLogWrite(now time.Time) {
	thr := s.cfg.DiskStallThreshold
	if thr <= 0 {
		return
	}
	if s.stall.observe(s.stall.since(now), int64(thr), s.stallCredit()) {
		s.metrics.diskStalls.Inc()
		s.cfg.Logger.Warn("Raft log write stalled: shedding leadership and leases",
			"waiting", time.Duration(s.stall.waited.Load()).Round(time.Millisecond), "threshold", thr)
	}
}

// DiskStalled reports whether this node's disk counts as stalled at now: a
// log write in flight seen waiting for longer than
// Config.DiskStallThreshold, or one that did ended less than
// stallHoldTimeouts election timeouts ago.
func (s *Store) DiskStalled(now time.Time) bool {
	thr := s.cfg.DiskStallThreshold
	if thr <= 0 {
		return false
	}
	return s.stall.stalled(s.stall.since(now), int64(thr))
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
