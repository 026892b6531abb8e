package transport

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/raftrpcpb"
)

// RaftMessages serves one peer's message stream: every batch is checked
// (cluster, destination) and handed to the Handler; ranges the Handler
// does not know are acknowledged back.
func (t *Transport) RaftMessages(stream raftrpcpb.RaftTransport_RaftMessagesServer) error {
	ctx := stream.Context()
	// Receive on a goroutine so that StopServing can end the stream: the
	// handler returning cancels the stream, which ends Recv.
	type recv struct {
		batch *raftrpcpb.RaftMessageBatch
		err   error
	}
	ch := make(chan recv)
	go func() {
		for {
			b, err := stream.Recv()
			select {
			case ch <- recv{b, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var rv recv
		select {
		case rv = <-ch:
		case <-t.drain:
			return status.Error(codes.Unavailable, "raft transport: node stopping")
		}
		if rv.err != nil {
			// io.EOF: the sender closed its side; anything else: the
			// connection broke. Either way this stream is over, and
			// the sender will open a new one.
			return nil
		}
		batch := rv.batch
		if err := t.checkHeader(batch.GetClusterId(), batch.GetToNodeId()); err != nil {
			return err
		}
		for _, m := range batch.GetMessages() {
			if (m.GetMessage() == nil) != (m.GetRangeId() == 0) {
				// Neither is a node heartbeat (range 0, no message).
				return status.Errorf(codes.InvalidArgument, "raft transport: message without range or body from node %d", batch.GetFromNodeId())
			}
		}
		ack := t.cfg.Handler.HandleRaftMessages(ctx, batch)
		if len(ack.GetUnknownRangeIds()) > 0 || len(ack.GetRemoved()) > 0 {
			if err := stream.Send(ack); err != nil {
				return nil
			}
		}
	}
}

// checkHeader refuses traffic meant for another cluster or node: a
// message delivered to the wrong process must never reach a Raft group.
func (t *Transport) checkHeader(clusterID string, toNode uint64) error {
	if clusterID != t.cfg.ClusterID {
		return status.Errorf(codes.FailedPrecondition, "raft transport: cluster %q, this node is in cluster %q", clusterID, t.cfg.ClusterID)
	}
	if toNode != t.cfg.NodeID {
		return status.Errorf(codes.FailedPrecondition, "raft transport: message for node %d delivered to node %d", toNode, t.cfg.NodeID)
	}
	return nil
}

// Snapshot serves one incoming snapshot stream.
func (t *Transport) Snapshot(stream raftrpcpb.RaftTransport_SnapshotServer) error {
	first, err := stream.Recv()
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "raft transport: snapshot stream without header: %v", err)
	}
	h := first.GetHeader()
	if h == nil {
		return status.Error(codes.InvalidArgument, "raft transport: snapshot stream must start with a header")
	}
	if err := t.checkHeader(h.GetClusterId(), h.GetToNodeId()); err != nil {
		return err
	}
	if h.GetMessage().GetSnapshot() == nil || h.GetRangeDescriptor() == nil || h.GetRangeId() == 0 {
		return status.Error(codes.InvalidArgument, "raft transport: snapshot header without message, snapshot or descriptor")
	}
	r := &SnapshotReader{stream: stream}
	herr := t.cfg.Handler.HandleSnapshot(stream.Context(), h, r)
	if herr == nil && !r.done {
		herr = fmt.Errorf("raft transport: snapshot handler returned before the end of the stream")
	}
	resp := &raftrpcpb.SnapshotResponse{Applied: herr == nil}
	if herr != nil {
		resp.Error = herr.Error()
		// Drain what the sender still has in flight so it sees our answer
		// rather than a reset stream.
		if !r.done {
			for {
				if _, err := stream.Recv(); err != nil {
					break
				}
			}
		}
	}
	return stream.SendAndClose(resp)
}
