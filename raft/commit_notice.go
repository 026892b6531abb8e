package raft

import (
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Commit notices (docs/replication.md, "Commit notices").
//
// When a leader's commit index moves it sends each follower an append
// without entries to tell it (Raft's bcastAppend), and the follower
// answers it as any append. With many ranges each range's round carries
// one write, so every write is followed by such a notice to each follower
// and its answer, which no later append of the round absorbs
// (coalesce.go): about two fifths of the messages at 256 ranges.
//
// The answer is an append acknowledgement of the notice's index (or, when
// the follower's commit index is past it, of that). When the leader
// already counts the follower as holding that index (its Progress is in
// StateReplicate with Match at or past the notice's index) the answer
// tells it nothing: in etcd-io/raft a MsgAppResp with an index at or
// below Match changes no Progress (MaybeUpdate is false), commits nothing,
// sends nothing, and frees no in-flight appends; a Progress in
// StateReplicate has no probe to end. The one thing it still does is mark
// the follower recently active, which the follower's answers to appends
// with entries (each such notice follows one) and its heartbeats do: a
// heartbeat is skipped for a follower only while it is recently active
// (heartbeat_skip.go), so after the leader's quorum check clears that
// mark, the next tick's heartbeat is sent and answered.
//
// So the leader marks such a notice commit_only on the wire, and the
// follower steps it into Raft as usual (it learns the commit index and
// applies at once: nothing waits longer) but drops the one answer it
// produces. The follower checks what it drops: only an acknowledgement
// (not a rejection) to the notice's sender, in the notice's term, of an
// index at or below the notice's, one answer per notice. Every other
// answer goes out: a rejection, an answer at a newer term (which tells a
// stale leader to step down), an acknowledgement of more than the notice
// named, and a second answer of the same index (a probe that the leader
// sent after it stopped counting the follower as replicating, duplicated
// or reordered by the network with the notice, still gets its answer).
// Raft tolerates the loss of any message; what must not be lost is an
// answer the leader waits for, and the leader waits for none of these.

// commitNotice is a commit_only append a follower stepped: the answer
// Raft makes to it is dropped.
type commitNotice struct {
	leader, term, index uint64
}

// markCommitOnlyLocked reports whether m, one of this leader's messages
// of the round, is a commit notice whose answer the leader needs not: an
// append without entries to a follower in StateReplicate whose
// acknowledged index (Match) is at or past the append's index.
// REQUIRES: raftMu.
func (r *Replica) markCommitOnlyLocked(m *pb.Message) bool {
	if r.store.cfg.Testing.AnswerCommitNotices || m.GetType() != pb.MsgApp || len(m.GetEntries()) != 0 || r.rn == nil {
		return false
	}
	ok := false
	r.rn.WithProgress(func(id uint64, _ etcdraft.ProgressType, pr tracker.Progress) {
		if id == m.GetTo() {
			ok = pr.State == tracker.StateReplicate && pr.Match >= m.GetIndex()
		}
	})
	return ok && m.GetTerm() == r.rn.BasicStatus().GetTerm()
}

// noteCommitNoticeLocked records that the commit_only append m was stepped,
// so that its answer is dropped from the next Ready.
// REQUIRES: raftMu.
func (r *Replica) noteCommitNoticeLocked(m *pb.Message) {
	if m.GetType() != pb.MsgApp || len(m.GetEntries()) != 0 {
		return
	}
	r.notices = append(r.notices, commitNotice{leader: m.GetFrom(), term: m.GetTerm(), index: m.GetIndex()})
}

// dropNoticeAnswersLocked removes from msgs (the responses of a
// MsgStorageAppend) the answers to the commit notices stepped since the
// last Ready, one per notice, and forgets the notices; it returns the
// messages kept and how many were dropped.
// REQUIRES: raftMu.
func (r *Replica) dropNoticeAnswersLocked(msgs []*pb.Message) ([]*pb.Message, int) {
	if len(r.notices) == 0 {
		return msgs, 0
	}
	dropped := 0
	for i, m := range msgs {
		if m.GetType() != pb.MsgAppResp || m.GetReject() {
			continue
		}
		for j, n := range r.notices {
			if n.leader == m.GetTo() && n.term == m.GetTerm() && m.GetIndex() <= n.index {
				r.notices = append(r.notices[:j], r.notices[j+1:]...)
				msgs[i] = nil
				dropped++
				break
			}
		}
		if len(r.notices) == 0 {
			break
		}
	}
	clear(r.notices)
	r.notices = r.notices[:0]
	if dropped == 0 {
		return msgs, 0
	}
	return dropNil(msgs), dropped
}
