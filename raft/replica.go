package raft

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/logstore"
)

// Replica is this node's replica of one range: one RawNode, its log
// store, and the state the rest of the node reads.
//
// Locking. raftMu serializes all Raft processing of the replica: the
// processing round holds it from the moment it drains the inbox until
// the Ready is applied and advanced. Other goroutines never take raftMu;
// they hand work over through the inbox (in.mu) and read published state
// under mu. Lock order: raftMu, then mu or in.mu; never the reverse.
type Replica struct {
	store   *Store
	rangeID uint64
	// queued is the scheduler's "already queued" flag.
	queued atomic.Bool

	raftMu sync.Mutex
	// Protected by raftMu:
	rn        *etcdraft.RawNode
	ls        *logstore.Store
	replicaID uint64
	// logBytesCounted is what this replica's log adds to Store.logBytes
	// (truncate.go).
	logBytesCounted int64
	// desc is the applied descriptor (nil while uninitialized).
	desc *kvpb.RangeDescriptor
	// proposals are proposals handed to Raft, by proposal ID, until they
	// are applied or known to be lost.
	proposals map[uint64]*proposal
	// outlived counts the proposals in proposals that this node made as
	// leader of a term it no longer leads: they wait for their entry to
	// apply or for a later term's entry to apply first (proposal.go).
	outlived int
	// group is the worker's apply group while a round handles the
	// replica (nil otherwise); pending are its apply messages staged and
	// not yet written, and parked is set while the group holds its raftMu
	// for them (apply_round.go).
	group   *applyGroup
	pending []pendingApply
	parked  bool
	// ccPending are configuration changes handed to Raft this round, to
	// check in its Ready that Raft did not swallow them.
	ccPending []*proposal
	// readRounds are ReadIndex requests sent to Raft, oldest first.
	readRounds    []*readRound
	nextReadRound uint64
	// lastRaftState and lastTerm detect leadership changes between rounds.
	lastRaftState etcdraft.StateType
	lastTerm      uint64
	lastLeader    uint64
	// campaignedWith: this replica's election was started by another's
	// (campaign_together.go), so it starts no others: one silent node's
	// ranges campaign together once, not once per range.
	campaignedWith bool
	// snaps are incoming snapshots stepped into Raft this round.
	snaps []*incomingSnapshot
	// peerNodes maps replica IDs to nodes as learned from incoming
	// messages: an uninitialized replica has no descriptor to look them
	// up in.
	peerNodes map[uint64]uint64
	// appSentTick maps followers to the store tick at which this leader
	// last sent them an append (heartbeat_skip.go).
	appSentTick map[uint64]uint64
	// notices are the commit notices stepped this round, whose answers
	// are dropped (commit_notice.go).
	notices []commitNotice
	// removed: a configuration change removed this replica; the round
	// destroys it once the Ready is handled and logWrites is zero.
	removed bool
	// logWrites counts this replica's appendWorks handed to the log
	// writer and not yet written or skipped. The log writer stages a
	// work under raftMu but writes the batch without it, so a replica
	// destroyed in between would have its log entries and HardState
	// written back after its deletion, under keys a later replica of the
	// same range reuses: destroying waits for zero.
	logWrites int
	// splits are the right-hand ranges of splits applied in this batch,
	// to create once it is written (split.go).
	splits []*kvpb.RangeDescriptor
	// Merges (merge.go): frozen is the state machine's freeze (nil when
	// not frozen) and frozenSince when this leader first saw it; merges are
	// the replicas taken over in this batch (their raftMu held until it
	// is written); deferredApply are apply messages waiting for a merged
	// range's freeze to apply on this node.
	frozen        *freezeRecord
	frozenSince   time.Time
	mergeAborting atomic.Bool
	merges        []*Replica
	deferredApply []*pb.Message
	// metaPushed is the generation this leader last stored in meta through
	// another node; metaPushing is set while it does (split.go).
	metaPushed  atomic.Uint64
	metaPushing atomic.Bool
	// maintenance timers (the Store's clock; only for pacing background
	// work).
	lastDedupGC    time.Time
	lastLeaseRenew time.Time
	// lastStallShed is when this replica, as leader on a stalled disk,
	// last asked Raft to transfer its leadership (diskstall.go).
	lastStallShed time.Time
	lastMetaCheck time.Time
	// Quiescence (quiesce.go), under raftMu: idleTicks counts the ticks
	// since the log last grew (it was idleLast long) or work came in;
	// quiescedTick is the store's tick count when the replica went to
	// sleep; quiesceOut and
	// wakeOut are the quiesce heartbeats and the wake-up message to send
	// this round; metaOKGen is the generation meta was last found to
	// hold, metaSeenGen the same found by reconcileMetaLocked in this
	// node's copy of meta. asleep and sleepLeaderNode (the node of the leader when it
	// went to sleep) are read by the ticker without raftMu.
	idleTicks       int
	idleLast        uint64
	quiescedTick    uint64
	quiesceOut      []*pb.Message
	wakeOut         []*pb.Message
	metaOKGen       uint64
	metaSeenGen     uint64
	asleep          atomic.Bool
	sleepLeaderNode atomic.Uint64
	// sm is the range's state machine: committed entries apply through it
	// (apply.go, package apply).
	sm apply.StateMachine
	// appliedBuf is reused for what each apply returns.
	appliedBuf []apply.Applied

	// in is the inbox: work handed over by other goroutines.
	in struct {
		sync.Mutex
		msgs []*pb.Message
		from []uint64 // from[i] is the node msgs[i] came from
		// notices are those of msgs marked commit_only (commit_notice.go).
		notices []*pb.Message
		// quiesce holds quiesce heartbeats (quiesce.go), qfrom their nodes.
		quiesce []*pb.Message
		qfrom   []uint64
		// leaderDead: the ticker found the node of this sleeping
		// follower's leader not live.
		leaderDead bool
		// campaignFrom: another replica of this node started an election
		// in place of a leader on node campaignFrom, which is not live
		// (campaign_together.go); campaign too if this replica still
		// follows a leader there.
		campaignFrom uint64
		props        []*proposal
		reads        []*readWaiter
		ticks        int
		snaps        []*incomingSnapshot
		snapStatus   []snapStatus
		unreachable  []uint64
		transferTo   uint64
		inspect      []func(*Replica)
		// removedBy is a newer descriptor, reported by a peer, that no
		// longer holds this replica.
		removedBy *kvpb.RangeDescriptor
	}

	// mu guards the state published for readers. Written only by the
	// round (under raftMu).
	mu struct {
		sync.RWMutex
		desc      *kvpb.RangeDescriptor
		replicaID uint64
		state     etcdraft.StateType
		term      uint64
		leader    uint64 // replica ID, 0 if unknown
		// leaderMoved is cancelled (and replaced) when leader changes
		// (leader_watch.go); nil until the first publish.
		leaderMoved       context.Context
		cancelLeaderMoved context.CancelFunc
		commit            uint64
		applied           uint64
		appliedTerm       uint64
		last              uint64
		truncated         uint64
		// appliedInTerm: as leader, this replica has applied an entry of
		// its own term, so its applied state holds every write any earlier
		// leader acknowledged. Lease reads require it.
		appliedInTerm bool
		// leaseExpiry: the leader lease is valid until then (monotonic
		// clock). Zero when there is none.
		leaseExpiry time.Time
		// transferring: a leadership transfer is under way; no lease reads.
		transferring bool
		// lastLeaseRead: when a lease read last happened; renewal stops
		// when reads stop.
		lastLeaseRead time.Time
		waiters       []*appliedWaiter
		destroyed     bool
		// frozenInto: a freeze for a merge into this range is applied
		// (merge.go); 0 when not frozen.
		frozenInto uint64
		// held: the index of the first committed entry whose apply is
		// held back (merge.go, the gate); 0 when none is.
		held uint64
	}
}

type snapStatus struct {
	to     uint64
	failed bool
}

// newReplica builds a replica of rangeID from the engine's state: an
// initialized one if a descriptor is stored, an uninitialized one
// (replicaID must then be given or stored) otherwise.
func (s *Store) newReplica(rangeID, replicaID uint64) (*Replica, error) {
	db := s.cfg.Engine
	ls, err := logstore.Load(db, rangeID, s.cfg.EntryCacheBytes)
	if err != nil {
		return nil, err
	}
	ls.ShareCache(s.entryCaches)
	storedID, err := logstore.LoadReplicaID(db, rangeID)
	if err != nil {
		return nil, err
	}
	switch {
	case replicaID == 0 && storedID == 0:
		return nil, fmt.Errorf("raft: range %d: no replica ID stored", rangeID)
	case replicaID == 0:
		replicaID = storedID
	case storedID != 0 && storedID != replicaID:
		return nil, fmt.Errorf("raft: range %d: stored replica ID %d, asked for %d", rangeID, storedID, replicaID)
	}
	r := &Replica{
		store:     s,
		rangeID:   rangeID,
		ls:        ls,
		replicaID: replicaID,
		proposals: make(map[uint64]*proposal),
		peerNodes: make(map[uint64]uint64),
	}
	if r.sm, err = s.cfg.StateMachines.New(rangeID, (*smHost)(r)); err != nil {
		return nil, fmt.Errorf("raft: range %d: loading its state machine: %w", rangeID, err)
	}
	r.syncDescriptorLocked()
	rn, err := etcdraft.NewRawNode(s.raftConfig(r))
	if err != nil {
		return nil, fmt.Errorf("raft: range %d: %w", rangeID, err)
	}
	r.rn = rn
	bs := rn.BasicStatus()
	r.lastRaftState, r.lastTerm, r.lastLeader = bs.RaftState, bs.GetTerm(), bs.Lead
	r.publishLocked(bs)
	return r, nil
}

func (s *Store) raftConfig(r *Replica) *etcdraft.Config {
	c := &s.cfg
	return &etcdraft.Config{
		ID:                        r.replicaID,
		ElectionTick:              c.ElectionTicks,
		HeartbeatTick:             c.HeartbeatTicks,
		Storage:                   r.ls,
		Applied:                   r.ls.Applied().Index,
		MaxSizePerMsg:             c.MaxSizePerMsg,
		MaxCommittedSizePerReady:  c.MaxCommittedSizePerReady,
		MaxUncommittedEntriesSize: c.MaxUncommittedEntriesSize,
		MaxInflightMsgs:           c.MaxInflightMsgs,
		CheckQuorum:               true,
		PreVote:                   true,
		// ReadIndex confirms leadership with a quorum round. The lease fast
		// path is ours (read.go), on the monotonic clock: raft's
		// ReadOnlyLeaseBased counts ticks, which a paused process does not.
		ReadOnlyOption: etcdraft.ReadOnlySafe,
		// Client writes are proposed only on the leader (phase 1 answers
		// NotLeader elsewhere); forwarding serves internal commands, such
		// as meta updates proposed from a follower.
		DisableProposalForwarding: false,
		StepDownOnRemoval:         true,
		// Log writes and applies are handed over as messages (see
		// replica_ready.go), so a round never waits for an fsync.
		AsyncStorageWrites: true,
		Logger:             raftLogger{l: s.cfg.Logger, rangeID: r.rangeID, replicaID: r.replicaID},
	}
}

// publishLocked copies the replica's state into mu for readers.
// REQUIRES: raftMu (or exclusive ownership during construction).
func (r *Replica) publishLocked(bs etcdraft.BasicStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.desc = r.desc
	r.mu.replicaID = r.replicaID
	r.mu.state = bs.RaftState
	r.mu.term = bs.GetTerm()
	r.noteLeaderLocked(bs.Lead)
	r.mu.leader = bs.Lead
	r.mu.commit = bs.GetCommit()
	r.mu.applied = r.ls.Applied().Index
	r.mu.appliedTerm = r.ls.Applied().Term
	r.mu.last = r.ls.Last().Index
	r.mu.truncated = r.ls.Truncated().Index
	r.mu.transferring = bs.LeadTransferee != 0
	if bs.RaftState != etcdraft.StateLeader {
		r.mu.appliedInTerm = false
		r.mu.leaseExpiry = time.Time{}
	}
	if r.mu.transferring {
		// MsgTimeoutNow lets the transferee campaign without waiting out
		// the followers' election timeout: the lease guarantee is gone.
		r.mu.leaseExpiry = time.Time{}
	}
}

// StateMachine returns the replica's range state machine (fixed for the
// replica's life). Callers use only what it documents as safe without the
// replica's raftMu.
func (r *Replica) StateMachine() apply.StateMachine { return r.sm }

// RangeID returns the range's ID.
func (r *Replica) RangeID() uint64 { return r.rangeID }

// Descriptor returns the replica's applied descriptor (nil while
// uninitialized). The caller must not modify it.
func (r *Replica) Descriptor() *kvpb.RangeDescriptor {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.desc
}

// AppliedIndex returns the index of the last applied entry.
func (r *Replica) AppliedIndex() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.applied
}

// HasLeader reports whether this replica knows a leader of its range. It
// is Status().Leader != 0 without copying the status (and its descriptor):
// every write asks it.
func (r *Replica) HasLeader() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.leader != 0
}

// IsLeader reports whether this replica believes it is the leader.
func (r *Replica) IsLeader() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.state == etcdraft.StateLeader
}

// Term returns the replica's current term and whether it leads in it: the
// State and Term of Status without copying the status (and its
// descriptor).
func (r *Replica) Term() (term uint64, leader bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.term, r.mu.state == etcdraft.StateLeader
}

// notLeaderError describes the leader as this replica knows it.
func (r *Replica) notLeaderError() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.notLeaderErrorRLocked()
}

// notLeaderErrorRLocked: REQUIRES mu held (read or write).
func (r *Replica) notLeaderErrorRLocked() error {
	e := &NotLeaderError{RangeID: r.rangeID, Descriptor: r.mu.desc}
	if r.mu.leader != 0 && r.mu.leader != r.mu.replicaID {
		e.LeaderReplicaID = r.mu.leader
		e.LeaderNodeID = nodeOfReplica(r.mu.desc, r.mu.leader)
	}
	return e
}

// nodeOfReplica returns the node holding replicaID in desc, or 0.
func nodeOfReplica(desc *kvpb.RangeDescriptor, replicaID uint64) uint64 {
	for _, rd := range desc.GetReplicas() {
		if rd.GetReplicaId() == replicaID {
			return rd.GetNodeId()
		}
	}
	return 0
}

// nodeForLocked returns the node holding replicaID: from the descriptor,
// or as learned from messages. REQUIRES: raftMu.
func (r *Replica) nodeForLocked(replicaID uint64) uint64 {
	if n := nodeOfReplica(r.desc, replicaID); n != 0 {
		return n
	}
	return r.peerNodes[replicaID]
}

// RaftStatus is a snapshot of a replica's Raft state.
type RaftStatus struct {
	RangeID      uint64
	ReplicaID    uint64
	State        string // "leader", "follower", "candidate", "pre-candidate"
	Term         uint64
	Leader       uint64 // replica ID
	LeaderNodeID uint64
	Commit       uint64
	Applied      uint64
	LastIndex    uint64
	Truncated    uint64
	LeaseValid   bool
	// Quiescent: the range is at rest here (quiesce.go): no ticks.
	Quiescent  bool
	Descriptor *kvpb.RangeDescriptor
	// Held is the index of the first committed entry held back from
	// applying by the state machine's gate (a merge waiting for its
	// right-hand range, merge.go) or a test's TestingKnobs.HoldApply; 0
	// when none is.
	Held uint64
}

// Status returns the replica's published state.
func (r *Replica) Status() RaftStatus {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return RaftStatus{
		RangeID:      r.rangeID,
		ReplicaID:    r.mu.replicaID,
		State:        stateName(r.mu.state),
		Term:         r.mu.term,
		Leader:       r.mu.leader,
		LeaderNodeID: nodeOfReplica(r.mu.desc, r.mu.leader),
		Commit:       r.mu.commit,
		Applied:      r.mu.applied,
		LastIndex:    r.mu.last,
		Truncated:    r.mu.truncated,
		LeaseValid:   r.leaseValidRLocked(r.store.now()),
		Quiescent:    r.asleep.Load(),
		Descriptor:   apply.CloneDescriptor(r.mu.desc),
		Held:         r.mu.held,
	}
}

func stateName(s etcdraft.StateType) string {
	switch s {
	case etcdraft.StateLeader:
		return "leader"
	case etcdraft.StateFollower:
		return "follower"
	case etcdraft.StateCandidate:
		return "candidate"
	case etcdraft.StatePreCandidate:
		return "pre-candidate"
	}
	return s.String()
}

// NotLeaderError returns the *NotLeaderError describing the leader as this
// replica knows it.
func (r *Replica) NotLeaderError() error { return r.notLeaderError() }

// shouldCampaignOnStart reports whether the replica should campaign at
// once instead of waiting out an election timeout: when it is its range's
// only voter (nobody else can lead), or when the range has never elected
// a leader (it is at its bootstrap term) and it is the voter with the
// lowest ID (one candidate, no split vote). Anything else waits, so that a
// restarting node does not disturb a leader with an election.
func (r *Replica) shouldCampaignOnStart() bool {
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	if r.desc == nil {
		return false
	}
	var lowest uint64
	voters := 0
	for _, rd := range r.desc.GetReplicas() {
		if rd.GetType() != kvpb.ReplicaType_REPLICA_TYPE_VOTER {
			continue
		}
		voters++
		if lowest == 0 || rd.GetReplicaId() < lowest {
			lowest = rd.GetReplicaId()
		}
	}
	if voters == 1 {
		return lowest == r.replicaID
	}
	return r.ls.HardState().GetTerm() == initialTerm && lowest == r.replicaID
}
