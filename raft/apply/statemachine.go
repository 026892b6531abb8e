// Package apply is the boundary between replication and a range's state
// machine: the one interface through which raft/ hands committed log
// entries to the range state machine (rangesm/), and the few descriptor
// helpers both sides need.
//
// Replication (raft/) orders entries, makes them durable and decides when
// they are committed; it does not know what a command means. The state
// machine (rangesm/) decodes and evaluates commands, keeps the range's
// replicated state (its data, its descriptor, dedup records, meta, the
// freeze of a merge) and says what applying an entry means for
// replication: a proposal to answer, a configuration change to give Raft,
// a right-hand range to create. Replication builds its state machines
// through a Factory it is given (Config.StateMachines); it imports no
// state machine package.
package apply

import (
	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/storage"
)

// StateMachine is one replica's range state machine. Replication calls it
// under the replica's raftMu only, one call at a time, in log order.
//
// Applying a group of committed entries goes:
//
//  1. MayApply for each entry (the gate): false holds the entry, and every
//     entry after it, back until a later round, when it is asked again.
//  2. Apply(ents) stages the entries' writes into Batch and returns what
//     each entry meant. Replication then adds its own state for the group
//     (the applied index, with the state machine's AppliedState in the
//     same record; the state of new right-hand ranges) to Batch.
//  3. Replication writes Batch (alone, or appended to other ranges' batches
//     in one engine write) without fsync, then calls Written. The log is
//     durable and applying is deterministic, so a crash re-applies from
//     the last applied index that reached the engine.
//
// Everything Apply decides must depend only on the entries and the
// replicated state, never on the clock, the node or the network: that is
// what keeps replicas identical. An entry that cannot apply (keys outside
// the range, an expired dedup window, a malformed command) is applied as a
// deterministic rejection in its Applied.Result. An error from Apply means
// the state machine cannot go on (the engine failed, the local state
// contradicts the log): it is fatal to the node.
type StateMachine interface {
	// Descriptor returns the applied range descriptor (nil for a replica
	// that has no state yet: it waits for a snapshot).
	Descriptor() *kvpb.RangeDescriptor
	// Frozen returns the merge the range is frozen for (the left-hand
	// range and its generation when it froze); frozen is false when there
	// is none.
	Frozen() (left, leftGeneration uint64, frozen bool)

	// MayApply reports whether committed entry e may apply now. The one
	// entry that waits is a merge whose right-hand range has not applied
	// its freeze on this node yet (rangesm's merge.go).
	MayApply(e *pb.Entry) bool
	// Apply applies ents, in order, into Batch and appends one Applied per
	// entry to out, which it returns (callers reuse out: no allocation per
	// entry).
	Apply(ents []*pb.Entry, out []Applied) ([]Applied, error)
	// Plain reports whether applying ents only writes the range's own
	// state and triggers nothing (client writes): their batch may then
	// wait for a write shared with other ranges (raft's apply_round.go).
	Plain(ents []*pb.Entry) bool
	// AppliedState returns the state machine's state after the entries
	// Apply just applied, the last of them at index and term, encoded:
	// replication writes it in the applied state record, in Batch (one
	// record per range and apply batch instead of one each). nil keeps
	// none there. The state machine remembers index and term: a batch it
	// writes early (before it reads the engine) carries its state with
	// the applied index of the batch before.
	AppliedState(index, term uint64) []byte
	// Batch is the batch Apply stages into. Replication adds its own
	// applied state to it and writes it.
	Batch() *storage.Batch
	// Written tells the state machine that Batch reached the engine: it
	// empties it for the next group.
	Written()
	// Rest tells the state machine that its range went to rest on this
	// node (raft's quiesce.go), with every applied batch written: it may
	// free what it keeps for the next batch, since an idle range's
	// replica should cost little memory.
	Rest()

	// Restore reloads the state machine from the engine after a snapshot
	// replaced the range's replicated state there.
	Restore() error
}

// Applied is what applying one entry means for replication.
type Applied struct {
	// ProposalID identifies the proposal the entry carried when this node
	// proposed it (zero otherwise): its proposer gets Result.
	ProposalID uint64
	// Result is the command's outcome (the zero Result for an entry that
	// carries no command).
	Result command.Result
	// ConfChange, for a configuration change entry, is the change to give
	// Raft's ApplyConfChange: the entry's own, or a change that changes
	// nothing if the state machine rejected it.
	ConfChange *pb.ConfChangeV2
	// Descriptor, for a configuration change that applied, is the range
	// descriptor after it: it must describe Raft's configuration after
	// ConfChange.
	Descriptor *kvpb.RangeDescriptor
	// DescriptorChanged: the entry changed the range descriptor or its
	// freeze; replication reads Descriptor and Frozen again.
	DescriptorChanged bool
	// Split is the right-hand range of a split whose replica this node
	// creates (Host.CreatesSplitReplica said so): replication stages its
	// initial Raft state into Batch and creates it once Batch is written.
	Split *kvpb.RangeDescriptor
}

// Host is what a state machine asks of replication. Its methods are
// called from within Apply and MayApply, under the replica's raftMu.
type Host interface {
	// NodeID is this node's ID: Apply reports the proposals it made.
	NodeID() uint64
	// Counters are the metrics the state machine adds to.
	Counters() Counters
	// WriteEngine writes a batch the state machine cuts early, before it
	// reads the engine (replication's engine write: a full disk is waited
	// out).
	WriteEngine(b *storage.Batch, wo storage.WriteOptions) error
	// CreatesSplitReplica reports whether applying a split must create
	// this node's replica of right: not if one exists already, nor if it
	// was removed from this node since.
	CreatesSplitReplica(right *kvpb.RangeDescriptor) (bool, error)
	// RangeApplied reports this node's replica of rangeID: whether there is
	// one, whether it has state (a descriptor), and its applied index.
	RangeApplied(rangeID uint64) (applied uint64, initialized, exists bool)
	// TakeOver locks this node's replica of right for a merge into the
	// calling range, after checking it is right at the state a merge
	// expects (frozen for the calling range at leftGeneration, applied up
	// to freezeIndex), and stages the deletion of its Raft state into
	// Batch. It stays locked until the merge's batch is written, then
	// retires. The state machine takes over the replicated state.
	TakeOver(right *kvpb.RangeDescriptor, leftGeneration, freezeIndex uint64) error
}

// Counters are the replication metrics a state machine adds to.
type Counters struct {
	// Writes counts the engine writes the state machine makes itself: a
	// batch written early so that a command can read the engine.
	Writes prometheus.Counter
	// DedupHits counts client writes answered from a dedup record.
	DedupHits prometheus.Counter
}

// Factory makes the state machines of one node's replicas.
type Factory interface {
	// New returns the state machine of this node's replica of rangeID,
	// loaded from the engine.
	New(rangeID uint64, host Host) (StateMachine, error)
	// Meta reads this node's copy of the meta range.
	Meta() MetaReader
}

// MetaReader reads this node's copy of the meta range (possibly stale):
// replication resolves node addresses and repairs meta's copies of its
// descriptors through it.
type MetaReader interface {
	// Nodes returns the node registry, by node ID.
	Nodes() ([]*kvpb.NodeDescriptor, error)
	// Descriptor returns meta's copy of range rangeID's descriptor, or nil.
	Descriptor(rangeID uint64) (*kvpb.RangeDescriptor, error)
	// Lookup returns the descriptors of the user range holding userKey and
	// of up to prefetch following ranges.
	Lookup(userKey []byte, prefetch int) ([]*kvpb.RangeDescriptor, error)
	// Descriptors returns every descriptor in meta, meta's own first.
	Descriptors() ([]*kvpb.RangeDescriptor, error)
}
