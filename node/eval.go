package node

import (
	"context"
	"errors"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft"
)

// A validated write request becomes a command (command/): the
// operation and the request header's client_id and request_seq. It is
// proposed through the range's Raft group and evaluated at apply time on
// every replica, so a CompareAndSwap compares against the applied state in
// log order and needs no latches, and a retry of the same
// (client_id, request_seq) is applied at most once (docs/replication.md).

func putCmd(req *kvpb.PutRequest) *command.Command {
	return &command.Command{Kind: command.KindPut,
		Mutations: []command.Mutation{{Kind: command.KindPut, Key: req.GetKey(), Value: req.GetValue()}}}
}

func deleteCmd(req *kvpb.DeleteRequest) *command.Command {
	return &command.Command{Kind: command.KindDelete,
		Mutations: []command.Mutation{{Kind: command.KindDelete, Key: req.GetKey()}}}
}

func deleteRangeCmd(req *kvpb.DeleteRangeRequest) *command.Command {
	return &command.Command{Kind: command.KindDeleteRange,
		Mutations: []command.Mutation{{Kind: command.KindDeleteRange, Key: req.GetStartKey(), Value: req.GetEndKey()}}}
}

// batchCmd keeps the mutations in order: applied as one engine batch, a
// later one wins. A put's lease is in its Mutation.Lease; the server
// attaches it and makes the command a KindLeaseBatch
// (attachBatchLeases).
func batchCmd(req *kvpb.BatchRequest) *command.Command {
	c := &command.Command{Kind: command.KindBatch, Mutations: make([]command.Mutation, 0, len(req.GetMutations()))}
	for _, m := range req.GetMutations() {
		switch op := m.GetOp().(type) {
		case *kvpb.Mutation_Put:
			c.Mutations = append(c.Mutations, command.Mutation{Kind: command.KindPut, Key: op.Put.GetKey(), Value: op.Put.GetValue(), Lease: op.Put.GetLease()})
		case *kvpb.Mutation_Delete:
			c.Mutations = append(c.Mutations, command.Mutation{Kind: command.KindDelete, Key: op.Delete.GetKey()})
		case *kvpb.Mutation_DeleteRange:
			c.Mutations = append(c.Mutations, command.Mutation{Kind: command.KindDeleteRange,
				Key: op.DeleteRange.GetStartKey(), Value: op.DeleteRange.GetEndKey()})
		}
	}
	return c
}

func casCmd(req *kvpb.CompareAndSwapRequest) (*command.Command, error) {
	c := &command.Command{Kind: command.KindCAS, CAS: command.CAS{
		Key: req.GetKey(), ExpectAbsent: req.GetExpectAbsent(), Expected: req.GetExpectedValue(),
		Delete: req.GetDelete(), NewValue: req.GetNewValue(),
	}}
	ev, ok, err := timestampFromProto("expected_version", req.GetExpectedVersion())
	if err != nil {
		return nil, err
	}
	if ok {
		c.CAS.ExpectVersion, c.CAS.ExpectedVersion = true, ev
	}
	return c, nil
}

// write proposes cmd to r's range with the request header's identity and
// a proposal timestamp from the node's TimestampSource (after the header's
// observed moved the clock), and waits for it to apply. The returned
// error is a status for the client; the result's Version is the version
// the write applied at.
//
// A write refused for another transaction's intent waits on the leader
// in the key's queue and is proposed again once the key is free
// (txn_wait.go); when the wait ends otherwise, the intent's transaction
// was pushed and the conflict is answered.
func (n *Node) write(ctx context.Context, op string, h *kvpb.RequestHeader, r *raft.Replica, cmd *command.Command) (command.Result, uint64, error) {
	cmd.ClientID, cmd.RequestSeq = h.GetClientId(), h.GetRequestSeq()
	if err := n.observeHeader(op, h); err != nil {
		return command.Result{}, 0, err
	}
	var ticket *lockTicket
	defer func() { ticket.leave() }()
	self := waiterOf(cmd)
	for {
		res, idx, err := n.propose(ctx, op, r, cmd)
		if err != nil {
			return res, 0, err
		}
		if res.Code == command.CodeIntentConflict && !readKey(cmd, res.Value) {
			if ticket == nil || ticket.key != string(res.Value) {
				ticket.leave()
				var prio hlc.Timestamp // a plain write: its age is now
				if self != nil {
					prio = self.prio
				}
				ticket = n.lockQueues.join(r.RangeID(), res.Value, prio)
				n.metrics.lockWaits.Inc()
			}
			werr := n.waitOnLock(ctx, r, ticket, self)
			if werr == nil {
				continue
			}
			if errors.Is(werr, errDeadlock) {
				res.Message = werr.Error()
			}
		}
		if err := n.resultError(op, h, r, &res); err != nil {
			return res, 0, err
		}
		if res.Code == command.CodeOK && n.lockQueues.lockCount() > 0 {
			// A write to a locked key ends its lock (txn_lock.go).
			n.lockQueues.wrote(r.RangeID(), writtenKeys(cmd))
		}
		if cmd.Kind == command.KindTxnRecord {
			// The answer carries the record's timestamp, no version:
			// while STAGING a bound up to a second above C0
			// (docs/transactions.md, "Pushed intents"), which observed
			// would move the oracle's clock ahead with every stage. A
			// COMMITTED record's C is the version of an intent, observed
			// when that intent was written.
			return res, idx, nil
		}
		if err := n.observeVersion(ctx, op, res.Version); err != nil {
			return res, 0, err
		}
		return res, idx, nil
	}
}

// propose is one proposal of write: cmd proposed and applied, its result
// not yet judged.
func (n *Node) propose(ctx context.Context, op string, r *raft.Replica, cmd *command.Command) (command.Result, uint64, error) {
	if r.Frozen() {
		return command.Result{}, 0, n.raftError(op, r.FrozenError())
	}
	if err := n.awaitLeader(ctx, op, r, r.Descriptor()); err != nil {
		return command.Result{}, 0, err
	}
	if !r.IsLeader() {
		// Not proposed here (a follower does not forward writes): the
		// answer is NotLeader, so it goes out before the proposal
		// timestamp, not after it. While meta elected a leader in place
		// of a killed oracle, a follower held every write for that
		// election before saying so; the client, its attempt timed out,
		// then avoided that node for two seconds, though it was the
		// range's next leader (docs/unavailability.md).
		return command.Result{}, 0, n.raftError(op, r.NotLeaderError())
	}
	// Only the leader's disk decides: a follower answers "not leader" as
	// usual and the client goes to the leader.
	if err := n.diskFullError(op); err != nil { // disk.go
		return command.Result{}, 0, err
	}
	release, err := n.admitWrite(ctx, op, cmd) // memory.go
	if err != nil {
		return command.Result{}, 0, err
	}
	if cmd.Kind == command.KindTxnWrite && !cmd.Timestamp.IsZero() {
		// A transaction's intents go in at its commit candidate C0 (an
		// oracle timestamp the caller checked against the clock), so
		// that every range answers p = C0 unless its frontier passed it
		// (txn_parallel.go).
	} else if cmd.Timestamp, err = n.proposalTimestamp(ctx, op); err != nil {
		release()
		return command.Result{}, 0, err
	}
	res, idx, err := n.store.Propose(ctx, r.RangeID(), cmd)
	release()
	if err != nil {
		return res, 0, n.raftError(op, err)
	}
	return res, idx, nil
}
