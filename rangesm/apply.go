package rangesm

import (
	"bytes"
	"errors"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
)

// Applying committed entries (the Raft README's step 3).
//
// Every replica applies the same entries in the same order against the
// same state, and every decision below depends only on the entry and that
// state, never on the clock, the node or the network: that is what keeps
// replicas identical. A command that cannot apply (keys outside the
// range, an expired dedup window, a malformed command) is applied as a
// deterministic rejection that changes nothing but the applied index. A
// failure that is not deterministic (the engine cannot write) is fatal to
// the node: the replica's state would otherwise silently diverge.
//
// All entries of one Ready are applied into one engine batch together with
// the new applied state, written without fsync: the log is durable, so a
// crash re-applies from the last applied state that reached the disk.

// Apply implements apply.StateMachine.
func (r *Range) Apply(ents []*pb.Entry, out []apply.Applied) ([]apply.Applied, error) {
	r.startFeed()
	for _, e := range ents {
		out = append(out, apply.Applied{})
		a := &out[len(out)-1]
		r.applying = e.GetIndex()
		r.applyingTerm = e.GetTerm()
		var err error
		switch e.GetType() {
		case pb.EntryNormal:
			if len(e.GetData()) == 0 {
				// The empty entry a new leader appends.
				continue
			}
			if k, ok := command.PeekKind(e.GetData()); ok && r.skipApplied(e.GetIndex(), k) {
				// Applied before a restart, its writes written with the
				// MVCC state (mvcc_state.go); nobody waits for it.
				continue
			}
			var cmd command.Command
			a.Result, err = r.applyNormal(e, &cmd)
			if err != nil {
				return out, err
			}
			if cmd.Kind == command.KindClose || cmd.Kind == command.KindGC ||
				cmd.Kind == command.KindTxnRecord || cmd.Kind == command.KindTxnPrevent {
				// Change the MVCC state (and a GC old versions, a record
				// op a transaction record) only.
			} else if !cmd.Kind.IsWrite() {
				// A DedupGC, a split, any command but a client write may
				// change the dedup state behind the cache; any of them may
				// change the descriptor.
				r.dedup.clear()
				a.DescriptorChanged = true
			}
			if cmd.Kind == command.KindSplit && a.Result.Code == command.CodeOK {
				a.Split = r.pendingSplit
			}
			r.pendingSplit = nil
			if cmd.ProposerNode == r.host.NodeID() {
				a.ProposalID = cmd.ProposalID
			}
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			r.dedup.clear()
			if err := r.applyConfChange(e, a); err != nil {
				return out, err
			}
			a.DescriptorChanged = true
		default:
			return out, fmt.Errorf("entry %d has unknown type %v", e.GetIndex(), e.GetType())
		}
	}
	// The MVCC state and stats are staged by AppliedState, which
	// replication calls next.
	return out, nil
}

// Plain implements apply.StateMachine: ents are only client writes (and
// the empty entries new leaders append), whose application touches
// nothing but the range's own keys, its dedup records and its applied
// state, and triggers nothing once written.
//
// A range that holds intents, or entries that write some, are not plain:
// their application may write the batch early to read the lock table
// (intent.go, spanConflict).
func (r *Range) Plain(ents []*pb.Entry) bool {
	if r.intents > 0 {
		return false
	}
	for _, e := range ents {
		if e.GetType() != pb.EntryNormal {
			return false
		}
		if len(e.GetData()) == 0 {
			continue
		}
		k, ok := command.PeekKind(e.GetData())
		if !ok {
			return false
		}
		switch k {
		case command.KindPut, command.KindDelete, command.KindDeleteRange, command.KindBatch, command.KindCAS, command.KindClose,
			command.KindTxnCommit, command.KindLeasePut, command.KindLeaseDelete, command.KindTxnResolve, command.KindTxnRecord,
			command.KindLeaseBatch, command.KindLeaseCAS:
		default:
			return false
		}
	}
	return true
}

// REQUIRES: the replica's raftMu.
func (r *Range) applyNormal(e *pb.Entry, cmd *command.Command) (command.Result, error) {
	if err := command.Decode(e.GetData(), cmd); err != nil {
		if errors.Is(err, command.ErrUnknownVersion) {
			// Every replica must apply this entry; this build cannot.
			return command.Result{}, fmt.Errorf("entry %d: %w: upgrade this node", e.GetIndex(), err)
		}
		return command.Result{Code: command.CodeMalformed, Message: err.Error()}, nil
	}
	if cmd.Kind.IsWrite() && cmd.ClientID != 0 {
		return r.applyDeduplicated(cmd)
	}
	return r.evaluate(cmd)
}

// evaluate evaluates cmd against the applied state (through the
// overlay) and stages its writes.
// REQUIRES: the replica's raftMu.
func (r *Range) evaluate(cmd *command.Command) (command.Result, error) {
	a := &r.ov
	desc := r.desc
	if r.frozen != nil && refusedWhileFrozen(cmd.Kind) {
		return command.Result{Code: command.CodeRangeFrozen,
			Message: fmt.Sprintf("range %d is frozen for a merge into range %d", r.rangeID, r.frozen.left)}, nil
	}
	switch cmd.Kind {
	case command.KindPut, command.KindDelete, command.KindDeleteRange, command.KindBatch:
		for i := range cmd.Mutations {
			if res, ok := checkMutationInRange(desc, &cmd.Mutations[i]); !ok {
				return res, nil
			}
		}
		if res, ok, err := r.mutationsConflict(cmd.Mutations, nil); err != nil || !ok {
			return res, err
		}
		return r.applyMutations(cmd)

	case command.KindTxnCommit:
		return r.applyTxnCommit(cmd)

	case command.KindTxnWrite:
		return r.applyTxnWrite(cmd)

	case command.KindTxnResolve:
		return r.applyTxnResolve(cmd)

	case command.KindTxnRecord:
		return r.applyTxnRecord(cmd)

	case command.KindTxnPrevent:
		return r.applyTxnPrevent(cmd)

	case command.KindCAS, command.KindLeaseCAS:
		return r.applyCAS(cmd)

	case command.KindClose:
		r.advance(cmd.Close)
		return command.Result{}, nil

	case command.KindDedupGC:
		return r.applyDedupGC(cmd)

	case command.KindPutNode:
		return r.applyPutNode(cmd)

	case command.KindPutDescriptor:
		return r.applyPutDescriptor(cmd)

	case command.KindRemoveNode:
		if r.rangeID != keys.MetaRangeID {
			return command.Result{Code: command.CodeNotMeta}, nil
		}
		a.del(keys.NodeKey(cmd.NodeID))
		return command.Result{NodeID: cmd.NodeID}, nil

	case command.KindChangeReplicas:
		return command.Result{Code: command.CodeMalformed, Message: "ChangeReplicas outside a configuration change"}, nil

	case command.KindSplit:
		return r.applySplit(cmd)

	case command.KindAllocRangeID:
		return r.applyAllocRangeID()

	case command.KindPutDescriptors:
		return r.applyPutDescriptors(cmd)

	case command.KindFreeze:
		return r.applyFreeze(cmd)

	case command.KindUnfreeze:
		return r.applyUnfreeze(cmd)

	case command.KindMerge:
		return r.applyMerge(cmd)

	case command.KindMergeAbort:
		return r.applyMergeAbort(cmd)

	case command.KindGC:
		return r.applyGC(cmd)
	case command.KindTSOWindow:
		return r.applyTSOWindow(cmd)
	case command.KindLeaseGrant, command.KindLeaseRevoke, command.KindLeaseAttach, command.KindLeaseSwept:
		return r.applyLease(cmd)
	case command.KindLeasePut:
		return r.applyLeasePut(cmd)
	case command.KindLeaseDelete:
		return r.applyLeaseDelete(cmd)
	case command.KindLeaseBatch:
		return r.applyLeaseBatch(cmd)
	case command.KindProtect, command.KindRelease:
		return r.applyProtect(cmd)
	}
	return command.Result{Code: command.CodeMalformed, Message: fmt.Sprintf("unknown kind %v", cmd.Kind)}, nil
}

// applyMutations writes cmd's mutations at v = max(T, F.Next()), in
// order (a later one of a key wins), and raises the frontier to v. The
// caller has checked that every key is in the range.
// REQUIRES: the replica's raftMu.
func (r *Range) applyMutations(cmd *command.Command) (command.Result, error) {
	v, ok := r.nextVersion(cmd.Timestamp)
	if !ok {
		return frontierAtMax(), nil
	}
	w := r.writer()
	for i := range cmd.Mutations {
		m := &cmd.Mutations[i]
		var err error
		switch m.Kind {
		case command.KindPut:
			err = w.Put(m.Key, v, m.Value)
		case command.KindDelete:
			_, err = w.Delete(m.Key, v)
		case command.KindDeleteRange:
			var end []byte
			if len(m.Value) > 0 {
				end = m.Value
			}
			_, err = w.DeleteRange(m.Key, end, v)
		}
		if err != nil {
			// v is above every version of the range (the frontier
			// rule), so this is local state contradicting the log.
			return command.Result{}, fmt.Errorf("%v at %s: %w", cmd.Kind, v, err)
		}
	}
	r.advance(v)
	return command.Result{Version: v}, nil
}

// applyCAS compares and maybe swaps one key, at apply time: on its value
// (or absence), or on its newest version when the command asks. A
// KindLeaseCAS writes the new value attached to its lease, and is
// refused, writing nothing, if the swap would apply above its attach
// window (as applyLeasePut).
// REQUIRES: the replica's raftMu.
func (r *Range) applyCAS(cmd *command.Command) (command.Result, error) {
	c := &cmd.CAS
	if !keys.ContainsUserKey(r.desc, c.Key) {
		return outOfRange(r.desc, c.Key), nil
	}
	// Even a comparison that fails reads the key: it must not answer
	// from below an intent.
	if res, ok, err := r.keyConflict(c.Key, nil, "cannot compare"); err != nil || !ok {
		return res, err
	}
	w := r.writer()
	cur, found, err := w.Get(c.Key)
	if err != nil {
		return command.Result{}, fmt.Errorf("CAS read of %q: %w", c.Key, err)
	}
	res := command.Result{Found: found}
	if found {
		res.Value = append([]byte(nil), cur.Value...)
		res.CurrentVersion, res.CurrentCreated = cur.Version, cur.Created
	}
	var swap bool
	switch {
	case c.ExpectVersion:
		swap = found && cur.Version == c.ExpectedVersion
	case c.ExpectAbsent:
		swap = !found
	default:
		swap = found && string(cur.Value) == string(c.Expected)
	}
	if !swap {
		return res, nil
	}
	v, ok := r.nextVersion(cmd.Timestamp)
	if !ok {
		return frontierAtMax(), nil
	}
	leased := cmd.Kind == command.KindLeaseCAS
	if leased && cmd.Lease.Deadline.Less(v) {
		return command.Result{Code: command.CodeLeaseWindowPassed,
			Message: fmt.Sprintf("swap of %q attached to lease %d would apply at %s, past its attach window (%s)", c.Key, cmd.Lease.ID, v, cmd.Lease.Deadline)}, nil
	}
	switch {
	case c.Delete:
		_, err = w.Delete(c.Key, v)
	case leased:
		err = w.PutLeased(c.Key, v, c.NewValue, cmd.Lease.ID)
	default:
		err = w.Put(c.Key, v, c.NewValue)
	}
	if err != nil {
		return command.Result{}, fmt.Errorf("CAS at %s: %w", v, err)
	}
	r.advance(v)
	res.Succeeded, res.Version = true, v
	return res, nil
}

func frontierAtMax() command.Result {
	return command.Result{Code: command.CodeMalformed, Message: "the range's frontier is at the largest timestamp: no version is above it"}
}

// checkMutationInRange rejects a mutation whose keys are outside d.
func checkMutationInRange(d *kvpb.RangeDescriptor, m *command.Mutation) (command.Result, bool) {
	switch m.Kind {
	case command.KindDeleteRange:
		if !keys.ContainsUserSpan(d, m.Key, m.Value) {
			return command.Result{Code: command.CodeKeyOutOfRange,
				Message: fmt.Sprintf("span [%q, %q) is not inside range %d [%q, %q)", m.Key, m.Value, d.GetRangeId(), d.GetStartKey(), d.GetEndKey())}, false
		}
	default:
		if !keys.ContainsUserKey(d, m.Key) {
			return outOfRange(d, m.Key), false
		}
	}
	return command.Result{}, true
}

func outOfRange(d *kvpb.RangeDescriptor, k []byte) command.Result {
	return command.Result{Code: command.CodeKeyOutOfRange,
		Message: fmt.Sprintf("key %q is not in range %d [%q, %q)", k, d.GetRangeId(), d.GetStartKey(), d.GetEndKey())}
}

// applyPutNode registers a node in the meta range's registry,
// allocating its ID if it has none. Registering an address that is
// already registered returns the existing ID, so a node that crashed
// before saving its ID can join again.
// REQUIRES: the replica's raftMu.
func (r *Range) applyPutNode(cmd *command.Command) (command.Result, error) {
	if r.rangeID != keys.MetaRangeID {
		return command.Result{Code: command.CodeNotMeta}, nil
	}
	a := &r.ov
	n := proto.Clone(cmd.Node).(*kvpb.NodeDescriptor)
	if n.GetAddress() == "" {
		return command.Result{Code: command.CodeMalformed, Message: "node without an address"}, nil
	}
	if n.GetNodeId() == 0 {
		// Same address registered already? Scan the registry (small).
		if err := r.flush(); err != nil {
			return command.Result{}, err
		}
		nodes, err := readNodes(a.db)
		if err != nil {
			return command.Result{}, err
		}
		for _, old := range nodes {
			if old.GetAddress() == n.GetAddress() {
				return command.Result{NodeID: old.GetNodeId()}, nil
			}
		}
		next, err := r.readCounter("node-id")
		if err != nil {
			return command.Result{}, err
		}
		if next == 0 {
			next = 1
		}
		n.NodeId = next
		a.put(keys.CounterKey("node-id"), encodeCounter(next+1))
	} else {
		// An explicit ID must not go backwards past the allocator.
		next, err := r.readCounter("node-id")
		if err != nil {
			return command.Result{}, err
		}
		if n.GetNodeId() >= next {
			a.put(keys.CounterKey("node-id"), encodeCounter(n.GetNodeId()+1))
		}
	}
	// Decommissioning and started are one-way: a node registering again
	// stays drained, and a node that has served stays one that may not
	// bootstrap again (node/identity.go).
	if old, found, err := a.get(keys.NodeKey(n.GetNodeId())); err != nil {
		return command.Result{}, err
	} else if found {
		var od kvpb.NodeDescriptor
		if proto.Unmarshal(old, &od) == nil {
			n.Decommissioning = n.Decommissioning || od.GetDecommissioning()
			n.Started = n.Started || od.GetStarted()
		}
	}
	v, err := proto.MarshalOptions{Deterministic: true}.Marshal(n)
	if err != nil {
		return command.Result{}, err
	}
	a.put(keys.NodeKey(n.GetNodeId()), v)
	return command.Result{NodeID: n.GetNodeId()}, nil
}

func (r *Range) readCounter(name string) (uint64, error) {
	v, found, err := r.ov.get(keys.CounterKey(name))
	if err != nil || !found {
		return 0, err
	}
	return decodeCounter(v)
}

// applyPutDescriptor stores the meta copy of a range descriptor if
// it is newer than the one stored.
// REQUIRES: the replica's raftMu.
func (r *Range) applyPutDescriptor(cmd *command.Command) (command.Result, error) {
	if r.rangeID != keys.MetaRangeID {
		return command.Result{Code: command.CodeNotMeta}, nil
	}
	a := &r.ov
	d := cmd.Descriptor
	if d.GetRangeId() == 0 {
		return command.Result{Code: command.CodeMalformed, Message: "descriptor without a range ID"}, nil
	}
	if err := r.flush(); err != nil {
		return command.Result{}, err
	}
	old, oldKey, err := r.metaIdx.find(a.db, d.GetRangeId(), true)
	if err != nil {
		return command.Result{}, err
	}
	if old != nil && old.GetGeneration() >= d.GetGeneration() {
		return command.Result{}, nil // stale or already there
	}
	v, err := logstore.EncodeDescriptor(d)
	if err != nil {
		return command.Result{}, err
	}
	key := keys.MetaKeyFor(d)
	// displaced is the range whose descriptor the put replaces at key
	// (a range merged into d, or a side of a split), dropped from the
	// index of meta.
	var displaced uint64
	if oldKey == nil || string(oldKey) != string(key) {
		cur, found, err := a.get(key)
		if err != nil {
			return command.Result{}, err
		}
		if found {
			if cd, err := logstore.DecodeDescriptor(cur); err == nil && cd.GetRangeId() != d.GetRangeId() {
				// A late copy of a range merged away (its repair was in
				// flight when it froze) finds the merged range at its key:
				// a newer range whose span holds all of its own. It is not
				// stored over it.
				if old == nil && cd.GetGeneration() > d.GetGeneration() && bytes.Compare(cd.GetStartKey(), d.GetStartKey()) < 0 {
					return command.Result{}, nil
				}
				displaced = cd.GetRangeId()
			}
		}
	}
	if oldKey != nil && string(oldKey) != string(key) {
		a.del(oldKey)
	}
	a.put(key, v)
	r.metaIdx.set(d.GetRangeId(), key, displaced)
	return command.Result{}, nil
}
