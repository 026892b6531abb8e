package raft

import (
	"context"
	"errors"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/api/raftrpcpb"
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
		r.in.Lock()
		r.in.msgs = append(r.in.msgs, m)
		r.in.from = append(r.in.from, rm.GetFromNodeId())
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
	desc := rm.GetDescriptor_()
	m := rm.GetMessage()
	if desc == nil || desc.GetRangeId() != rm.GetRangeId() {
		return nil, ErrRangeNotFound
	}
	switch m.GetType() {
	case pb.MsgHeartbeat, pb.MsgApp, pb.MsgSnap:
	default:
		return nil, ErrRangeNotFound
	}
	me := replicaOnNode(desc, s.cfg.NodeID)
	if me == nil || me.GetReplicaId() != m.GetTo() {
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
