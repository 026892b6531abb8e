package rangesm

import (
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

// Applying a configuration change entry: the state machine decides whether
// the change applies (the descriptor it was computed from is still the
// range's, the range is not frozen) and stages the new descriptor;
// replication gives Raft the change (or one that changes nothing) and
// checks that the descriptor describes Raft's new configuration.

// rejectConfChange is the change applied in place of a rejected one: a
// single change of replica 0, which Raft ignores (confchange.Changer
// skips NodeId 0 for exactly this purpose).
var rejectConfChange = &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeAddNode.Enum(), NodeId: new(uint64(0))}}}

// applyConfChange applies a configuration change entry into out: the
// change for Raft, the result and, for a change this node proposed, the
// proposal ID.
// REQUIRES: the replica's raftMu.
func (r *Range) applyConfChange(e *pb.Entry, out *apply.Applied) error {
	var cc *pb.ConfChangeV2
	if e.GetType() == pb.EntryConfChange {
		var v1 pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &v1); err != nil {
			return fmt.Errorf("conf change entry %d: %w", e.GetIndex(), err)
		}
		cc = v1.AsV2()
	} else {
		cc = &pb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("conf change entry %d: %w", e.GetIndex(), err)
		}
	}
	cur := r.desc
	var next *kvpb.RangeDescriptor
	if cc.LeaveJoint() {
		if !apply.IsJoint(cur) {
			return fmt.Errorf("entry %d leaves a joint configuration, but descriptor generation %d is not joint", e.GetIndex(), cur.GetGeneration())
		}
		next = apply.LeaveJoint(cur)
	} else {
		var cmd command.Command
		var reject command.Result
		err := command.Decode(cc.GetContext(), &cmd)
		switch {
		case errors.Is(err, command.ErrUnknownVersion):
			return fmt.Errorf("conf change entry %d: %w: upgrade this node", e.GetIndex(), err)
		case err != nil:
			reject = command.Result{Code: command.CodeMalformed, Message: err.Error()}
		case cmd.Kind != command.KindChangeReplicas:
			reject = command.Result{Code: command.CodeMalformed, Message: fmt.Sprintf("conf change carries a %v command", cmd.Kind)}
		case r.frozen != nil:
			reject = command.Result{Code: command.CodeRangeFrozen, Message: fmt.Sprintf("range %d is frozen for a merge", r.rangeID)}
		case cmd.ExpectedGeneration != cur.GetGeneration() || cmd.Descriptor.GetRangeId() != r.rangeID ||
			cmd.Descriptor.GetGeneration() <= cur.GetGeneration():
			reject = command.Result{Code: command.CodeDescriptorChanged,
				Message: fmt.Sprintf("change computed from generation %d; range %d is at generation %d", cmd.ExpectedGeneration, r.rangeID, cur.GetGeneration())}
		default:
			next = cmd.Descriptor
		}
		if cmd.ProposerNode == r.host.NodeID() {
			out.ProposalID = cmd.ProposalID
		}
		if reject.Code != command.CodeOK {
			if apply.IsJoint(cur) {
				// Raft offers no no-op change inside a joint configuration;
				// the leader never proposes one (Raft refuses anything but
				// leaving while joint), so this entry is a bug.
				return fmt.Errorf("conf change entry %d must be rejected inside a joint configuration: %s", e.GetIndex(), reject.Message)
			}
			out.Result = reject
			out.ConfChange = rejectConfChange
			return nil
		}
	}
	v, err := logstore.EncodeDescriptor(next)
	if err != nil {
		return err
	}
	r.ov.put(keys.DescriptorKey(r.rangeID), v)
	if r.rangeID == keys.MetaRangeID {
		// Meta holds its own descriptor's meta copy: keep it exact.
		r.ov.put(keys.MetaRangeDescriptorKey(), v)
	}
	r.desc = next
	out.ConfChange, out.Descriptor = cc, next
	return nil
}
