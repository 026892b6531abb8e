package raft

import (
	"bytes"
	"context"
	"errors"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
)

// HandleRaftMessages implements transport.Handler: it queues each message
// on its replica (creating an uninitialized replica when a message names
// a replica this node should hold but does not yet) and returns the
// ranges it cannot deliver to.
func (s *Store) HandleRaftMessages(_ context.Context, batch *raftrpcpb.RaftMessageBatch) *raftrpcpb.RaftMessageBatchAck {
	var unknown []uint64
	var removed []*kvpb.RangeDescriptor
	touched := make(map[*Replica]struct{}, 4)
	s.noteContact(batch.GetFromNodeId())
	for _, rm := range batch.GetMessages() {
		if isNodeHeartbeat(rm) {
			continue // its batch noted the sender live (liveness.go)
		}
		m := rm.GetMessage()
		r, err := s.Replica(rm.GetRangeId())
		if err != nil {
			r, err = s.replicaForMessage(rm)
			if err != nil {
				if len(unknown) == 0 || unknown[len(unknown)-1] != rm.GetRangeId() {
					unknown = append(unknown, rm.GetRangeId())
				}
				continue
			}
		}
		if d := r.Descriptor(); d != nil && nodeOfReplica(d, m.GetFrom()) == 0 && m.GetFrom() < d.GetNextReplicaId() &&
			(len(removed) == 0 || removed[len(removed)-1].GetRangeId() != d.GetRangeId()) {
			// The sender's replica was removed from the range, and may not
			// know (its leader stopped talking to it once the removal
			// applied). Tell it.
			removed = append(removed, d)
		}
		if m.GetTo() != r.replicaID {
			// For an older incarnation of this node's replica, or a newer
			// one this node has not created yet: drop; Raft retries.
			continue
		}
		s.metrics.messagesReceived.Inc()
		if s.refuseForFullDisk(m) { // diskfull.go
			s.metrics.appendsRefused.Inc()
			continue
		}
		r.in.Lock()
		if rm.GetQuiesce() && m.GetType() == pb.MsgHeartbeat {
			r.in.quiesce = append(r.in.quiesce, m)
			r.in.qfrom = append(r.in.qfrom, rm.GetFromNodeId())
		} else {
			r.in.msgs = append(r.in.msgs, m)
			r.in.from = append(r.in.from, rm.GetFromNodeId())
			if rm.GetCommitOnly() {
				r.in.notices = append(r.in.notices, m)
			}
		}
		r.in.Unlock()
		touched[r] = struct{}{}
	}
	for r := range touched {
		s.sched.enqueue(r)
	}
	if len(unknown) == 0 && len(removed) == 0 {
		return nil
	}
	return &raftrpcpb.RaftMessageBatchAck{UnknownRangeIds: unknown, Removed: removed}
}

// onAck handles what a peer reported about this node's messages: a
// replica the peer knows was removed (by a newer descriptor that lacks
// it) is destroyed.
func (s *Store) onAck(_ uint64, ack *raftrpcpb.RaftMessageBatchAck) {
	for _, d := range ack.GetRemoved() {
		r, err := s.Replica(d.GetRangeId())
		if err != nil {
			continue
		}
		r.in.Lock()
		r.in.removedBy = d
		r.in.Unlock()
		s.sched.enqueue(r)
	}
}

// replicaForMessage creates the uninitialized replica a message from a
// range's leader is addressed to, if the message's descriptor places it
// on this node.
func (s *Store) replicaForMessage(rm *raftrpcpb.RangeMessage) (*Replica, error) {
	desc := rm.GetRangeDescriptor()
	m := rm.GetMessage()
	if desc == nil || desc.GetRangeId() != rm.GetRangeId() {
		return nil, ErrRangeNotFound
	}
	switch m.GetType() {
	case pb.MsgHeartbeat, pb.MsgApp, pb.MsgSnap:
	default:
		return nil, ErrRangeNotFound
	}
	me := apply.ReplicaOnNode(desc, s.cfg.NodeID)
	if me == nil || me.GetReplicaId() != m.GetTo() {
		return nil, ErrRangeNotFound
	}
	if s.awaitSplit(desc) {
		return nil, ErrRangeNotFound
	}
	r, err := s.getOrCreateReplica(rm.GetRangeId(), m.GetTo())
	if err != nil {
		if !errors.Is(err, ErrRangeNotFound) {
			s.cfg.Logger.Warn("cannot create replica for message", "range", rm.GetRangeId(), "err", err)
		}
		return nil, err
	}
	return r, nil
}

// onUnreachable tells each replica whose messages could not be delivered,
// so that Raft stops streaming appends to that follower and probes it.
func (s *Store) onUnreachable(_ uint64, msgs []*raftrpcpb.RangeMessage) {
	s.metrics.messagesDropped.Add(float64(len(msgs)))
	touched := make(map[*Replica]struct{}, 2)
	for _, rm := range msgs {
		r, err := s.Replica(rm.GetRangeId())
		if err != nil {
			continue
		}
		to := rm.GetMessage().GetTo()
		r.in.Lock()
		if n := len(r.in.unreachable); n == 0 || r.in.unreachable[n-1] != to {
			r.in.unreachable = append(r.in.unreachable, to)
		}
		r.in.Unlock()
		touched[r] = struct{}{}
	}
	for r := range touched {
		s.sched.enqueue(r)
	}
}

// splitWaitTimeouts is how many election timeouts a message for the
// right-hand side of a split is dropped while the local left-hand side
// has not applied it (awaitSplit): 10 s by default.
const splitWaitTimeouts = 10

// awaitSplit reports whether a message for desc's range, which this node
// does not hold, is to be dropped because the range was split off a
// local range that has not applied the split yet: one holding desc's
// start key without starting there. When that split applies, it creates
// the replica here from the split's own state (split.go). A replica
// created now by the message would be uninitialized, and the split then
// leaves it alone, so it could only be filled by a snapshot, a copy of
// the range's data that a split is meant not to need (in one bulk load a
// follower that lagged got the right-hand side of a split as a snapshot
// of 410,543 keys). The leader's messages are dropped instead; Raft sends
// them again. A split that has not applied here after splitWaitTimeouts
// election timeouts (the local replica is far behind, or stuck) no longer
// holds the range back: the replica is created and gets its snapshot, as
// before.
func (s *Store) awaitSplit(desc *kvpb.RangeDescriptor) bool {
	if keys.IsMetaRange(desc) || len(desc.GetStartKey()) == 0 {
		return false
	}
	pending := false
	for _, o := range s.Replicas() {
		od := o.Descriptor()
		if od == nil || o.rangeID == desc.GetRangeId() || keys.IsMetaRange(od) {
			continue
		}
		if bytes.Compare(od.GetStartKey(), desc.GetStartKey()) < 0 &&
			(len(od.GetEndKey()) == 0 || bytes.Compare(desc.GetStartKey(), od.GetEndKey()) < 0) {
			pending = true
			break
		}
	}
	s.splitWaits.Lock()
	defer s.splitWaits.Unlock()
	id := desc.GetRangeId()
	if !pending {
		delete(s.splitWaits.since, id)
		return false
	}
	now := s.now()
	if s.splitWaits.since == nil {
		s.splitWaits.since = map[uint64]time.Time{}
	}
	first, ok := s.splitWaits.since[id]
	if !ok {
		// Forget waits that ended without a replica here (the range
		// merged away, or this node left it) so the map stays small.
		for rid, t := range s.splitWaits.since {
			if now.Sub(t) > time.Minute {
				delete(s.splitWaits.since, rid)
			}
		}
		s.splitWaits.since[id] = now
		s.cfg.Logger.Debug("dropping messages for a range until the split that makes it applies here", "range", id)
		return true
	}
	limit := splitWaitTimeouts * time.Duration(s.cfg.ElectionTicks) * s.cfg.TickInterval
	if now.Sub(first) < limit {
		return true
	}
	delete(s.splitWaits.since, id)
	s.cfg.Logger.Info("the split that makes a range has not applied here; creating its replica for a snapshot",
		"range", id, "waited", now.Sub(first).Round(time.Millisecond))
	return false
}
