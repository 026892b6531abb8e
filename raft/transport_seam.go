package raft

import (
	"context"

	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/raft/transport"
)

// Transport is what the Store needs of the network: it sends Raft messages
// and snapshots to other nodes and delivers what arrives to the Store's
// TransportHandlers. The Store takes it from its caller (Config.NewTransport)
// so that a simulator can run the real replication over a simulated
// network; production uses the gRPC transport of raft/transport.
type Transport interface {
	// Send queues msgs for toNode. It does not block on the network; what
	// cannot be delivered is reported to OnUnreachable.
	Send(toNode uint64, msgs []*raftrpcpb.RangeMessage)
	// SendSnapshot streams one range snapshot described by h, its data
	// produced by src, and returns once the receiver applied or refused it.
	SendSnapshot(ctx context.Context, h *raftrpcpb.SnapshotHeader, src transport.SnapshotSource) error
	// SnapshotChunkBytes is the target size of one snapshot data chunk.
	SnapshotChunkBytes() int
	// Close stops sending and receiving; it is called once, by Store.Stop.
	Close()
}

// TransportHandlers is where a Transport delivers what it receives.
type TransportHandlers struct {
	// Handler receives message batches and snapshots from peers.
	Handler transport.Handler
	// OnUnreachable receives messages that could not be delivered to
	// toNode.
	OnUnreachable func(toNode uint64, msgs []*raftrpcpb.RangeMessage)
	// OnAck receives what toNode reported back about messages it received.
	OnAck func(toNode uint64, ack *raftrpcpb.RaftMessageBatchAck)
	// OnBatchSent is told of each batch of messages sent to toNode.
	OnBatchSent func(toNode uint64, msgs int)
}

var _ Transport = (*transport.Transport)(nil)

// newGRPCTransport is the default Config.NewTransport: the gRPC transport,
// resolving peers through cfg.Resolver (or the Store's own resolver).
func (s *Store) newGRPCTransport(h TransportHandlers) (Transport, error) {
	cfg := s.cfg
	resolver := cfg.Resolver
	if resolver == nil {
		resolver = s.resolve
	}
	return transport.New(transport.Config{
		NodeID:             cfg.NodeID,
		ClusterID:          cfg.ClusterID,
		Resolver:           resolver,
		Handler:            h.Handler,
		OnUnreachable:      h.OnUnreachable,
		OnAck:              h.OnAck,
		OnBatchSent:        h.OnBatchSent,
		LocalIP:            cfg.LocalIP,
		Credentials:        cfg.TransportCredentials,
		SnapshotRate:       cfg.SnapshotRate,
		SnapshotChunkBytes: cfg.SnapshotChunkBytes,
		Logger:             cfg.Logger,
	})
}
