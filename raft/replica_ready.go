package raft

import (
	"errors"
	"fmt"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Ready handling with asynchronous storage writes (etcd-io/raft's
// Config.AsyncStorageWrites; docs/replication.md, "The Ready loop").
//
// A Ready no longer has to be persisted and applied before the next one:
// Raft puts the work into local messages instead, and attaches to them the
// messages that depend on it.
//
//   - MsgStorageAppend (to LocalAppendThread) carries entries, the
//     HardState and a snapshot to persist, and as Responses the messages
//     that may only go out once they are durable (a follower's append
//     acknowledgement, a vote, the leader's own acknowledgement). It goes
//     to the node's log writer (logwriter.go), which persists the appends
//     of every range in one batch with one fsync and then delivers their
//     responses. The README's steps 1 and 2 hold by construction: nothing
//     that depends on a write leaves before the write is durable. One
//     with nothing to write, while nothing of the replica is in the log
//     writer, is complete at once (append_inline.go).
//   - MsgStorageApply (to LocalApplyThread) carries committed entries that
//     are durable locally. They are applied right here, under raftMu
//     (README step 3), and the response is stepped back.
//   - Every other message can be sent at once.
//
// Messages to each thread are handled in the order Raft produced them: one
// log writer consumes a FIFO queue, and applies happen in Ready order under
// raftMu. So a replica keeps taking proposals, sending appends and applying
// what committed while its previous writes are being fsync'd.

// appendWork is one MsgStorageAppend on its way to the log writer.
type appendWork struct {
	r *Replica
	m *pb.Message
	// snap is the incoming snapshot the message's Snapshot is the
	// metadata of.
	snap *incomingSnapshot
}

// handleReadyLocked handles the replica's Readys (a few at most, so that
// one busy replica does not hold the round): work for the log writer is
// returned, messages for peers are returned, committed entries are
// applied.
// REQUIRES: raftMu.
func (r *Replica) handleReadyLocked() (works []*appendWork, out []*pb.Message, err error) {
	if err := r.applyDeferredLocked(); err != nil {
		return nil, nil, err
	}
	for i := 0; i < 4 && r.rn.HasReady(); i++ {
		rd := r.rn.Ready()
		r.noteLeadershipLocked()
		if len(rd.ReadStates) > 0 {
			r.handleReadStatesLocked(rd.ReadStates)
		}
		snap, err := r.matchSnapshotLocked(&rd)
		if err != nil {
			return nil, nil, err
		}
		r.checkConfChangesAppendedLocked(rd.Entries)
		for _, m := range rd.Messages {
			switch m.GetTo() {
			case etcdraft.LocalAppendThread:
				if resps, dropped := r.dropNoticeAnswersLocked(m.GetResponses()); dropped > 0 { // commit_notice.go
					m.Responses = resps
					r.store.metrics.noticeAnswersDropped.Add(float64(dropped))
				}
				if len(works) == 0 && r.logWrites == 0 {
					if ok, resps := r.completeEmptyAppendLocked(m); ok { // append_inline.go
						r.store.metrics.appendsWithoutWrite.Inc()
						out = append(out, resps...)
						continue
					}
				}
				w := &appendWork{r: r, m: m}
				if m.GetSnapshot() != nil && !etcdraft.IsEmptySnap(m.GetSnapshot()) {
					w.snap, snap = snap, nil
					if w.snap == nil {
						return nil, nil, fmt.Errorf("range %d: snapshot %d to persist with no data received for it",
							r.rangeID, m.GetSnapshot().GetMetadata().GetIndex())
					}
				}
				works = append(works, w)
			case etcdraft.LocalApplyThread:
				if err := r.applyOrDeferLocked(m); err != nil {
					return nil, nil, err
				}
			default:
				out = append(out, m)
			}
		}
	}
	r.notices = r.notices[:0] // answered in the first Ready, or never
	if !r.removed {
		if err := r.maybeTruncateLocked(); err != nil {
			return nil, nil, fmt.Errorf("range %d: truncating the log: %w", r.rangeID, err)
		}
	}
	r.publishLocked(r.rn.BasicStatus())
	r.mu.Lock()
	r.releaseWaitersLocked()
	r.mu.Unlock()
	r.logWrites += len(works)
	return works, out, nil
}

// applyMessageLocked applies the committed entries of a MsgStorageApply,
// answers their proposers and steps the response back into Raft.
// REQUIRES: raftMu.
func (r *Replica) applyMessageLocked(m *pb.Message) error {
	r.store.metrics.rangeApplies.Inc()
	r.testingApply(m)
	if r.group != nil && len(m.GetEntries()) > 0 && r.sm.Plain(m.GetEntries()) {
		return r.stageMessageLocked(m) // apply_round.go
	}
	if err := r.completeBeforeApplyLocked(); err != nil {
		return err
	}
	var acks []applied
	if ents := m.GetEntries(); len(ents) > 0 {
		var err error
		if acks, err = r.applyEntriesLocked(ents); err != nil {
			return err
		}
	}
	for _, resp := range m.GetResponses() {
		if err := r.rn.Step(resp); err != nil {
			return fmt.Errorf("range %d: stepping an apply response: %w", r.rangeID, err)
		}
	}
	r.publishAppliedLocked()
	for _, a := range acks {
		a.p.finish(proposalResult{res: a.res, index: a.index})
	}
	return nil
}

// matchSnapshotLocked pairs the snapshot Raft accepted in rd (if any) with
// the data received for it; every other snapshot stepped this round was
// refused.
// REQUIRES: raftMu.
func (r *Replica) matchSnapshotLocked(rd *etcdraft.Ready) (*incomingSnapshot, error) {
	var idx uint64
	if !etcdraft.IsEmptySnap(rd.Snapshot) {
		idx = rd.Snapshot.GetMetadata().GetIndex()
	}
	var match *incomingSnapshot
	for _, in := range r.snaps {
		if idx != 0 && match == nil && in.index() == idx {
			match = in
			continue
		}
		in.done <- errors.New("raft did not accept the snapshot (stale or superseded)")
	}
	r.snaps = nil
	if idx != 0 && match == nil {
		return nil, fmt.Errorf("range %d: Raft accepted snapshot %d with no data received for it", r.rangeID, idx)
	}
	return match, nil
}

// noteLeadershipLocked reacts to a change of term, leader or role: the
// proposals made under the old ones have an unknown outcome, pending reads
// must go to the new leader, and the lease is gone.
// REQUIRES: raftMu.
func (r *Replica) noteLeadershipLocked() {
	bs := r.rn.BasicStatus()
	if bs.RaftState == r.lastRaftState && bs.GetTerm() == r.lastTerm && bs.Lead == r.lastLeader {
		return
	}
	r.failStaleProposalsLocked(bs)
	r.failReadsLocked(r.notLeaderErrorFrom(bs))
	if r.lastRaftState == etcdraft.StateFollower && r.lastLeader != 0 && !r.campaignedWith &&
		(bs.RaftState == etcdraft.StatePreCandidate || bs.RaftState == etcdraft.StateCandidate) {
		r.campaignTogetherLocked(r.lastLeader) // campaign_together.go
	}
	r.campaignedWith = false
	if bs.RaftState == etcdraft.StateLeader {
		r.store.cfg.Logger.Info("became leader", "range", r.rangeID, "replica", r.replicaID, "term", bs.GetTerm())
		r.store.metrics.leaderChanges.Inc()
		r.lastDedupGC = time.Time{}
	}
	r.mu.Lock()
	r.mu.appliedInTerm = false
	r.mu.leaseExpiry = time.Time{}
	r.mu.Unlock()
	r.lastRaftState, r.lastTerm, r.lastLeader = bs.RaftState, bs.GetTerm(), bs.Lead
}
