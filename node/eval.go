package node

import (
	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/internal/keys"
	"github.com/shaledb/shale/storage"
)

// Evaluation turns a validated write request into a writeCmd: the engine
// batch that carries it out and the latches it needs while it commits.
// Evaluation reads nothing and writes nothing; committing is the
// Committer's job. Keeping the two apart is what lets a replicated write
// path slot in: the batch's bytes are what a Raft entry will carry.

// writeCmd is a write request evaluated into engine writes.
type writeCmd struct {
	batch storage.Batch
	latch latchSet
}

func (n *Node) evalPut(req *kvpb.PutRequest) *writeCmd {
	cmd := &writeCmd{latch: n.latches.sharedSet([][]byte{req.Key}, false)}
	cmd.batch.Put(keys.UserKey(req.Key), req.Value)
	return cmd
}

func (n *Node) evalDelete(req *kvpb.DeleteRequest) *writeCmd {
	cmd := &writeCmd{latch: n.latches.sharedSet([][]byte{req.Key}, false)}
	cmd.batch.Delete(keys.UserKey(req.Key))
	return cmd
}

func (n *Node) evalDeleteRange(req *kvpb.DeleteRangeRequest) *writeCmd {
	cmd := &writeCmd{latch: latchSet{all: true}}
	lo, hi := keys.UserSpan(req.StartKey, req.EndKey)
	cmd.batch.DeleteRange(lo, hi)
	return cmd
}

// evalBatch evaluates the mutations in order into one engine batch: the
// engine applies its records atomically, and a later record wins.
func (n *Node) evalBatch(req *kvpb.BatchRequest) *writeCmd {
	cmd := &writeCmd{}
	touched := make([][]byte, 0, len(req.Mutations))
	all := false
	var ek []byte
	for _, m := range req.Mutations {
		switch op := m.Op.(type) {
		case *kvpb.Mutation_Put:
			ek = keys.AppendUserKey(ek[:0], op.Put.Key)
			cmd.batch.Put(ek, op.Put.Value)
			touched = append(touched, op.Put.Key)
		case *kvpb.Mutation_Delete:
			ek = keys.AppendUserKey(ek[:0], op.Delete.Key)
			cmd.batch.Delete(ek)
			touched = append(touched, op.Delete.Key)
		case *kvpb.Mutation_DeleteRange:
			lo, hi := keys.UserSpan(op.DeleteRange.StartKey, op.DeleteRange.EndKey)
			cmd.batch.DeleteRange(lo, hi)
			all = true
		}
	}
	cmd.latch = n.latches.sharedSet(touched, all)
	return cmd
}

// evalCompareAndSwap decides a CompareAndSwap given the key's current state
// (read under the key's exclusive latch). It returns the response and, when
// the swap succeeds, the batch that performs it.
func evalCompareAndSwap(req *kvpb.CompareAndSwapRequest, cur []byte, found bool) (*kvpb.CompareAndSwapResponse, *storage.Batch) {
	resp := &kvpb.CompareAndSwapResponse{Found: found, CurrentValue: cur}
	var match bool
	if req.ExpectAbsent {
		match = !found
	} else {
		match = found && string(cur) == string(req.ExpectedValue)
	}
	if !match {
		return resp, nil
	}
	resp.Succeeded = true
	b := &storage.Batch{}
	if req.Delete {
		b.Delete(keys.UserKey(req.Key))
	} else {
		b.Put(keys.UserKey(req.Key), req.NewValue)
	}
	return resp, b
}
