package raft

import (
	"context"
	"encoding/binary"
	"time"

	etcdraft "go.etcd.io/raft/v3"
)

// Linearizable reads (docs/replication.md, "Reads and leases").
//
// A read must reflect every write acknowledged before it began. The
// leader guarantees it in one of two ways, then serves the read from its
// applied state:
//
//   - ReadIndex (Raft thesis 6.4): the leader records its commit index and
//     confirms with a quorum of heartbeats that it is still the leader;
//     once its applied index reaches the recorded commit index, the read
//     may proceed. Every read queued while one round is being prepared
//     shares that round: one heartbeat round serves many reads.
//   - Lease: a ReadIndex round that started at time T and was confirmed by
//     a quorum proves that, until T + leaseDuration, no other replica can
//     have been elected (with CheckQuorum, followers that heard from the
//     leader refuse votes for an election timeout). Within the lease the
//     leader serves reads at its current commit index without a round
//     trip. T is read from the monotonic clock before the round is handed
//     to Raft, so a process paused by SIGSTOP comes back with an expired
//     lease rather than a stretched one; Raft's own ReadOnlyLeaseBased
//     counts ticks and would not. The lease is dropped the moment a
//     leadership transfer starts (MsgTimeoutNow lets the transferee skip
//     the followers' election timeout) and whenever leadership or the
//     configuration changes. It is also not used until the leader has
//     applied an entry of its own term.

// readWaiter is one read waiting for a ReadIndex round.
type readWaiter struct {
	ctx  context.Context
	done chan readResult // capacity 1
}

type readResult struct {
	index uint64
	err   error
}

// readRound is one ReadIndex request handed to Raft.
type readRound struct {
	id      uint64
	started time.Time // monotonic; the lease counts from here
	waiters []*readWaiter
}

// appliedWaiter waits for the applied index to reach index.
type appliedWaiter struct {
	index uint64
	done  chan struct{}
	// read: a read barrier's wait, which a stalled disk ends (err says
	// why) rather than leaving it to the reader's deadline.
	read bool
	err  error
}

// ReadBarrier blocks until this replica may serve a linearizable read
// from its applied state, and returns the applied index at that moment: a
// read of the engine made afterwards sees at least that state. Only the leader serves linearizable reads: elsewhere it fails
// with a *NotLeaderError. Nothing is written, so every error is safe to
// retry.
func (r *Replica) ReadBarrier(ctx context.Context) (uint64, error) {
	if err := r.store.checkRunning(); err != nil {
		return 0, unavailablef(r.rangeID, "%v", err)
	}
	now := r.store.now()
	r.mu.Lock()
	if r.mu.state != etcdraft.StateLeader {
		err := r.notLeaderErrorRLocked()
		r.mu.Unlock()
		return 0, err
	}
	if !r.store.cfg.DisableLeaseReads && r.leaseValidRLocked(now) {
		r.mu.lastLeaseRead = now
		idx := r.mu.commit
		r.mu.Unlock()
		return r.waitAppliedFor(ctx, idx, true)
	}
	r.mu.Unlock()

	w := &readWaiter{ctx: ctx, done: make(chan readResult, 1)}
	r.in.Lock()
	r.in.reads = append(r.in.reads, w)
	r.in.Unlock()
	r.store.sched.enqueue(r)
	var idx uint64
	select {
	case res := <-w.done:
		r.store.stepBarrier()
		if res.err != nil {
			return 0, res.err
		}
		idx = res.index
	case <-ctx.Done():
		return 0, unavailablef(r.rangeID, "read barrier: %v", ctx.Err())
	case <-r.store.stopped:
		return 0, unavailablef(r.rangeID, "read barrier: %v", ErrStopped)
	}
	r.mu.Lock()
	r.mu.lastLeaseRead = r.store.now()
	r.mu.Unlock()
	return r.waitAppliedFor(ctx, idx, true)
}

// leaseValidRLocked reports whether lease reads are allowed at now.
// REQUIRES: mu held.
func (r *Replica) leaseValidRLocked(now time.Time) bool {
	return r.mu.state == etcdraft.StateLeader && r.mu.appliedInTerm && !r.mu.transferring &&
		now.Before(r.mu.leaseExpiry.Add(r.store.leaseSlack())) && !r.store.DiskStalled(now)
}

// waitApplied blocks until the applied index reaches index, and returns
// the applied index then.
func (r *Replica) waitApplied(ctx context.Context, index uint64) (uint64, error) {
	return r.waitAppliedFor(ctx, index, false)
}

// waitAppliedFor is waitApplied; for a read barrier (read), a disk that
// stalls ends the wait with an Unavailable error instead: a leader applies
// only what its own log holds durably, so on a stalled disk the wait
// lasts as long as the stall, while a follower elected in its place
// (diskstall.go) serves the read at once. The oracle's lease check is such
// a read: left waiting, it held every write of the cluster that asked for
// a timestamp meanwhile for a whole attempt timeout.
func (r *Replica) waitAppliedFor(ctx context.Context, index uint64, read bool) (uint64, error) {
	r.mu.Lock()
	if r.mu.applied >= index {
		applied := r.mu.applied
		r.mu.Unlock()
		return applied, nil
	}
	if r.mu.destroyed {
		r.mu.Unlock()
		return 0, unavailablef(r.rangeID, "replica removed")
	}
	if read && r.store.DiskStalled(r.store.now()) {
		r.mu.Unlock()
		return 0, errDiskStalledRead(r.rangeID, index)
	}
	w := &appliedWaiter{index: index, done: make(chan struct{}), read: read}
	r.mu.waiters = append(r.mu.waiters, w)
	r.mu.Unlock()
	select {
	case <-w.done:
		if w.err != nil {
			return 0, w.err
		}
		r.store.stepBarrier()
		r.mu.RLock()
		applied := r.mu.applied
		r.mu.RUnlock()
		if applied < index {
			return 0, unavailablef(r.rangeID, "replica removed while waiting to apply index %d", index)
		}
		return applied, nil
	case <-ctx.Done():
		return 0, unavailablef(r.rangeID, "waiting to apply index %d: %v", index, ctx.Err())
	case <-r.store.stopped:
		return 0, unavailablef(r.rangeID, "%v", ErrStopped)
	}
}

// releaseWaitersLocked wakes waiters whose index has been applied (all of
// them if the replica is destroyed). REQUIRES: mu held for writing.
func (r *Replica) releaseWaitersLocked() {
	keep := r.mu.waiters[:0]
	for _, w := range r.mu.waiters {
		if r.mu.applied >= w.index || r.mu.destroyed {
			close(w.done)
		} else {
			keep = append(keep, w)
		}
	}
	clear(r.mu.waiters[len(keep):])
	r.mu.waiters = keep
}

// failStalledReadsLocked ends the read barriers waiting to apply: the
// node's disk stalled (diskstall.go). REQUIRES: mu held for writing.
func (r *Replica) failStalledReadsLocked() {
	keep := r.mu.waiters[:0]
	for _, w := range r.mu.waiters {
		if w.read && r.mu.applied < w.index {
			w.err = errDiskStalledRead(r.rangeID, w.index)
			close(w.done)
		} else {
			keep = append(keep, w)
		}
	}
	clear(r.mu.waiters[len(keep):])
	r.mu.waiters = keep
}

func errDiskStalledRead(rangeID, index uint64) error {
	return unavailablef(rangeID, "this node's disk is stalled: index %d is not applied here; its leadership is moving", index)
}

// startReadRoundLocked hands the queued reads (possibly none: a lease
// renewal) to Raft as one ReadIndex request.
// REQUIRES: raftMu.
func (r *Replica) startReadRoundLocked(waiters []*readWaiter) {
	r.nextReadRound++
	rr := &readRound{id: r.nextReadRound, started: r.store.now(), waiters: waiters}
	r.readRounds = append(r.readRounds, rr)
	var ctx [8]byte
	binary.BigEndian.PutUint64(ctx[:], rr.id)
	r.rn.ReadIndex(ctx[:])
}

// handleReadStatesLocked completes the rounds Raft confirmed. Raft answers
// rounds in order, so a confirmation also settles nothing earlier: earlier
// rounds without an answer are left to their own.
// REQUIRES: raftMu.
func (r *Replica) handleReadStatesLocked(states []etcdraft.ReadState) {
	for _, rs := range states {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		id := binary.BigEndian.Uint64(rs.RequestCtx)
		for i, rr := range r.readRounds {
			if rr.id != id {
				continue
			}
			for _, w := range rr.waiters {
				w.done <- readResult{index: rs.Index}
			}
			r.extendLease(rr.started)
			r.readRounds = append(r.readRounds[:i], r.readRounds[i+1:]...)
			break
		}
	}
}

// extendLease records that a quorum confirmed leadership for a round
// started at started. REQUIRES: raftMu.
func (r *Replica) extendLease(started time.Time) {
	exp := started.Add(r.store.cfg.leaseDuration())
	if r.store.DiskStalled(r.store.now()) {
		return // a leader on a stalled disk sheds its lease (diskstall.go)
	}
	r.mu.Lock()
	if r.mu.state == etcdraft.StateLeader && !r.mu.transferring && exp.After(r.mu.leaseExpiry) {
		r.mu.leaseExpiry = exp
	}
	r.mu.Unlock()
}

// failReadsLocked fails every pending read round (leadership lost).
// REQUIRES: raftMu.
func (r *Replica) failReadsLocked(err error) {
	for _, rr := range r.readRounds {
		for _, w := range rr.waiters {
			w.done <- readResult{err: err}
		}
	}
	r.readRounds = nil
}

// maybeRenewLeaseLocked starts a waiter-less ReadIndex round when the
// lease is close to expiring and reads have used it recently, so that a
// steady read load never waits for a round trip.
// REQUIRES: raftMu.
func (r *Replica) maybeRenewLeaseLocked(now time.Time) {
	if r.store.cfg.DisableLeaseReads {
		return
	}
	ld := r.store.cfg.leaseDuration()
	r.mu.RLock()
	leader := r.mu.state == etcdraft.StateLeader && r.mu.appliedInTerm && !r.mu.transferring
	remaining := r.mu.leaseExpiry.Sub(now)
	recent := now.Sub(r.mu.lastLeaseRead) < 2*ld
	r.mu.RUnlock()
	if !leader || !recent || remaining > ld/2 || len(r.readRounds) > 0 || r.store.DiskStalled(now) {
		return
	}
	if now.Sub(r.lastLeaseRenew) < r.store.cfg.TickInterval {
		return
	}
	r.lastLeaseRenew = now
	r.startReadRoundLocked(nil)
}
