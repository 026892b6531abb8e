package node

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// liveness tracks when each registered node last answered this node.
// Raft traffic alone does not tell (followers talk only to their leader),
// so every node probes every other node's gRPC health service every
// probeInterval (answers carry the peer's clock reading, for the offset
// monitor: clock.go); Admin.Nodes reports the most recent of the last probe
// answer and the last Raft message.
type liveness struct {
	mu   sync.Mutex
	seen map[uint64]time.Time
}

const probeInterval = 2 * time.Second

func (l *liveness) note(id uint64, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[uint64]time.Time{}
	}
	if t.After(l.seen[id]) {
		l.seen[id] = t
	}
}

func (l *liveness) last(id uint64) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[id]
}

// probeLoop probes the other members until ctx ends.
func (n *Node) probeLoop(ctx context.Context) {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		for _, m := range n.members() {
			id := m.GetNodeId()
			if id == n.ident.NodeID {
				continue
			}
			cc, err := n.peers.conn(id)
			if err != nil {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			var hdr metadata.MD
			sent := n.clock.PhysicalNow()
			resp, err := healthpb.NewHealthClient(cc).Check(pctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr))
			received := n.clock.PhysicalNow()
			cancel()
			if err == nil {
				// The answer carries the peer's clock: one offset
				// measurement (clock.go).
				n.recordProbeOffset(id, sent, received, hdr)
			}
			if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
				n.live.note(id, time.Now())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lastSeen is when node id last answered or sent this node anything.
func (n *Node) lastSeen(id uint64) time.Time {
	a, b := n.live.last(id), n.store.LastContact(id)
	if a.After(b) {
		return a
	}
	return b
}
