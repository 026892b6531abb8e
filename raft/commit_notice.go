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

// heldNotice is a commit notice a leader holds back until the follower's
// acknowledgement of its index arrives (holdNoticesLocked).
type heldNotice struct {
	m    *pb.Message
	tick uint64 // the store tick at which it was held
}

// holdNoticesLocked holds back the commit notices of out that go to a
// follower whose acknowledgement of their index is still on its way, and
// returns out with the held notices that may go now.
//
// Raft sends the commit notice to every follower as soon as a quorum
// holds an entry, so the notice to the slower follower of three leaves
// before that follower's acknowledgement arrives: the leader cannot mark
// it, and the follower answers it with what its acknowledgement already
// says. Such a notice (an append without entries to a follower in
// StateReplicate whose unacknowledged in-flight appends reach its index)
// is held, and goes out marked once the acknowledgement has arrived, at
// the latest one tick later unmarked (the acknowledgement was lost, or
// is late), or not at all when a later append to that follower, which
// carries the commit index too, goes out first, or when the replica is
// no longer the leader of that term (Raft tolerates the loss of any
// message). The follower learns the commit index one acknowledgement's
// way later than without this, a round trip it was making anyway.
// REQUIRES: raftMu.
func (r *Replica) holdNoticesLocked(out []*pb.Message, tick uint64) []*pb.Message {
	if len(r.held) == 0 && !hasEmptyApp(out) {
		return out
	}
	var prs map[uint64]tracker.Progress
	term := uint64(0)
	if r.rn != nil {
		bs := r.rn.BasicStatus()
		if bs.RaftState == etcdraft.StateLeader {
			term = bs.GetTerm()
			prs = make(map[uint64]tracker.Progress, 2)
			r.rn.WithProgress(func(id uint64, _ etcdraft.ProgressType, pr tracker.Progress) { prs[id] = pr })
		}
	}
	// Held notices a later append of out supersedes, or of another term,
	// are dropped; those acknowledged or a tick old go out.
	var release []*pb.Message
	kept := r.held[:0]
	for _, h := range r.held {
		pr, ok := prs[h.m.GetTo()]
		switch {
		case !ok || h.m.GetTerm() != term || laterApp(out, h.m.GetTo(), -1):
		case pr.Match >= h.m.GetIndex() || pr.State != tracker.StateReplicate || tick > h.tick:
			release = append(release, h.m)
		default:
			kept = append(kept, h)
		}
	}
	clear(r.held[len(kept):])
	r.held = kept
	if term != 0 && !r.store.cfg.Testing.AnswerCommitNotices {
		held := 0
		for i, m := range out {
			if m.GetType() != pb.MsgApp || len(m.GetEntries()) != 0 || m.GetTerm() != term || laterApp(out, m.GetTo(), i) {
				continue
			}
			pr, ok := prs[m.GetTo()]
			if !ok || pr.State != tracker.StateReplicate || pr.Match >= m.GetIndex() || pr.Next-1 < m.GetIndex() {
				continue
			}
			r.held = append(r.held, heldNotice{m: m, tick: tick})
			out[i] = nil
			held++
		}
		if held > 0 {
			out = dropNil(out)
		}
	}
	return append(out, release...)
}

// hasEmptyApp reports whether out holds an append without entries.
func hasEmptyApp(out []*pb.Message) bool {
	for _, m := range out {
		if m.GetType() == pb.MsgApp && len(m.GetEntries()) == 0 {
			return true
		}
	}
	return false
}

// laterApp reports whether out holds an append to peer after index i
// (i = -1: anywhere).
func laterApp(out []*pb.Message, peer uint64, i int) bool {
	for _, m := range out[i+1:] {
		if m != nil && m.GetType() == pb.MsgApp && m.GetTo() == peer {
			return true
		}
	}
	return false
}
