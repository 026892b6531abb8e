package raft

import (
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/storage"
)

// TestingKnobs are switches for tests only (Config.Testing): hooks that
// let a simulator observe the replication layer, and bugs planted on
// purpose so that a test can show the simulator's checkers catch them. The
// zero value changes nothing.
type TestingKnobs struct {
	// OnApply, if set, is called with the committed entries of each
	// apply message of range rangeID just before they are applied on
	// node nodeID, under the replica's raftMu (it must not call back into
	// the Store).
	OnApply func(nodeID, rangeID uint64, ents []*pb.Entry)
	// OnEngineWrite, if set, is called with every batch the store writes
	// to the engine (the log writer's, the apply writes, the state
	// machine's early writes, truncations) just before it is written: a
	// benchmark counts what each write costs the engine. It must not keep
	// or change b.
	OnEngineWrite func(nodeID uint64, b *storage.Batch)
	// OnSend, if set, is called with every group of Raft messages the
	// store hands to the transport for one peer node: a benchmark counts
	// them by kind. It must not keep or change msgs.
	OnSend func(nodeID uint64, msgs []*raftrpcpb.RangeMessage)
	// AnswerCommitNotices makes leaders send commit notices unmarked, so
	// that followers answer them as Raft does (commit_notice.go): a
	// benchmark measures what the marking saves.
	AnswerCommitNotices bool
	// HoldApply, if set, is asked before each group of committed entries
	// of range rangeID applies on node nodeID: true holds them (and every
	// later group) as the merge gate does (merge.go), until a later round
	// asks again and it says false. The log is not held: the entries are
	// appended, acknowledged and committed as usual. A transcript uses it
	// to keep one replica of a range behind its log (sim's merge.txt). It
	// runs under the replica's raftMu and must not call back into the
	// Store.
	HoldApply func(nodeID, rangeID uint64) bool
	// Bug plants one bug (BugNone: none).
	Bug PlantedBug
}

// PlantedBug names a bug a test plants in the replication layer.
type PlantedBug int

const (
	// BugNone plants nothing.
	BugNone PlantedBug = iota
	// BugApplyTwice applies the first entry of each apply message
	// holding a client write twice.
	BugApplyTwice
	// BugAckBeforeSync sends the messages that must wait for a log write
	// (append acknowledgements, votes) when the write is queued, before
	// it is durable. Effective in manual mode (Config.Manual), where the
	// write is a separate step a crash can come before.
	BugAckBeforeSync
	// BugStaleLease serves lease reads for ten election timeouts past the
	// lease's expiry.
	BugStaleLease
)

// testingApply reports m's entries to the OnApply hook and plants
// BugApplyTwice; it returns the entries to apply.
// REQUIRES: raftMu.
func (r *Replica) testingApply(m *pb.Message) {
	k := &r.store.cfg.Testing
	if k.Bug == BugApplyTwice {
		ents := m.GetEntries()
		for i, e := range ents {
			if e.GetType() == pb.EntryNormal && len(e.GetData()) > 0 {
				dup := make([]*pb.Entry, 0, len(ents)+1)
				dup = append(dup, ents[:i+1]...)
				dup = append(dup, ents[i:]...)
				m.Entries = dup
				break
			}
		}
	}
	if k.OnApply != nil && len(m.GetEntries()) > 0 {
		k.OnApply(r.store.cfg.NodeID, r.rangeID, m.GetEntries())
	}
}

// leaseSlack is how far past its expiry the lease is used: zero, except
// under BugStaleLease.
func (s *Store) leaseSlack() time.Duration {
	if s.cfg.Testing.Bug == BugStaleLease {
		return 10 * s.cfg.electionTimeout()
	}
	return 0
}
