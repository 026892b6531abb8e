package node

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
)

// Store stats of every node, for placement and for Admin.Nodes/Ranges.
//
// The placement controller gathers them at the start of each pass by
// asking every registered node for its Status (the node's heartbeat: the
// ranges it holds and leads, their sizes and loads, its engine's bytes).
// A node that answers is live as of then; its answer is cached so that
// Admin.Nodes and Admin.Ranges can report cluster-wide figures.

// nodeStats is one node's latest heartbeat.
type nodeStatsEntry struct {
	at       time.Time
	status   *kvpb.StatusResponse
	bytes    uint64
	qps      float64
	leaders  map[uint64]bool // range IDs this node leads
	replicas int
}

type heartbeats struct {
	mu    sync.Mutex
	nodes map[uint64]*nodeStatsEntry
}

// gatherHeartbeats asks every node in nodes for its Status, in parallel,
// and records the answers. It returns the answers by node ID.
func (n *Node) gatherHeartbeats(ctx context.Context, nodes []*kvpb.NodeDescriptor) map[uint64]*nodeStatsEntry {
	var mu sync.Mutex
	out := map[uint64]*nodeStatsEntry{}
	var wg sync.WaitGroup
	for _, m := range nodes {
		id := m.GetNodeId()
		wg.Add(1)
		go func() {
			defer wg.Done()
			var st *kvpb.StatusResponse
			var err error
			if id == n.ident.NodeID {
				st, err = (&adminServer{n: n}).Status(ctx, &kvpb.StatusRequest{})
			} else {
				c, cerr := n.peers.admin(id)
				if cerr != nil {
					return
				}
				hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				st, err = c.Status(hctx, &kvpb.StatusRequest{})
				cancel()
			}
			if err != nil {
				return
			}
			e := &nodeStatsEntry{at: time.Now(), status: st, leaders: map[uint64]bool{}}
			for _, r := range st.GetRanges() {
				e.replicas++
				e.bytes += r.GetApproximateBytes()
				if r.GetRaft().GetState() == "leader" {
					e.leaders[r.GetRaft().GetRangeId()] = true
					e.qps += r.GetQps()
				}
			}
			n.live.note(id, e.at)
			mu.Lock()
			out[id] = e
			mu.Unlock()
		}()
	}
	wg.Wait()
	n.hb.mu.Lock()
	if n.hb.nodes == nil {
		n.hb.nodes = map[uint64]*nodeStatsEntry{}
	}
	for id, e := range out {
		n.hb.nodes[id] = e
	}
	n.hb.mu.Unlock()
	return out
}

// nodeStats returns node id's used bytes and QPS (of the ranges it leads)
// from its latest heartbeat.
func (n *Node) nodeStats(id uint64) (uint64, float64) {
	n.hb.mu.Lock()
	defer n.hb.mu.Unlock()
	if e := n.hb.nodes[id]; e != nil {
		return e.bytes, e.qps
	}
	return 0, 0
}

// fillRemoteRangeStatus completes the statuses of ranges this node does
// not lead with what their leaders report (asking every node once).
func (n *Node) fillRemoteRangeStatus(ctx context.Context, rs []*kvpb.RangeStatus) {
	missing := false
	for _, r := range rs {
		if r.GetRaft().GetState() != "leader" {
			missing = true
		}
	}
	if !missing {
		return
	}
	nodes, err := n.store.MetaNodes()
	if err != nil {
		return
	}
	hb := n.gatherHeartbeats(ctx, nodes)
	byRange := map[uint64]*kvpb.RangeStatus{}
	for _, e := range hb {
		for _, r := range e.status.GetRanges() {
			if r.GetRaft().GetState() == "leader" {
				byRange[r.GetRaft().GetRangeId()] = r
			}
		}
	}
	for i, r := range rs {
		if r.GetRaft().GetState() == "leader" {
			continue
		}
		if l := byRange[r.GetRangeDescriptor().GetRangeId()]; l != nil {
			// Keep meta's descriptor only if the leader's is older.
			if l.GetRangeDescriptor().GetGeneration() < r.GetRangeDescriptor().GetGeneration() {
				l.RangeDescriptor = r.GetRangeDescriptor()
			}
			rs[i] = l
		}
	}
}

// knownNodes is the member list of a node without a copy of meta: itself
// and the nodes it knows addresses of.
func (n *Node) knownNodes() []*kvpb.NodeDescriptor {
	out := []*kvpb.NodeDescriptor{n.descriptor()}
	for id, a := range n.store.PeerAddresses() {
		if id != n.ident.NodeID {
			out = append(out, &kvpb.NodeDescriptor{NodeId: id, Address: a})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetNodeId() < out[j].GetNodeId() })
	return out
}

// peerRefreshLoop keeps the addresses of a node without a replica of meta
// up to date: it cannot read the registry itself, so it asks a node that
// can, every second (a node that joined after it would otherwise be
// unreachable for Raft traffic).
func (n *Node) peerRefreshLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := n.store.Replica(keys.MetaRangeID); err == nil {
			continue // reads its own copy (without reading it here)
		}
		s := &adminServer{n: n}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := forwardTo(s, rctx, func(c kvpb.AdminClient) (*kvpb.NodesResponse, error) {
			return c.Nodes(forwardCtx(rctx), &kvpb.NodesRequest{})
		})
		cancel()
		if err != nil {
			continue
		}
		for _, ns := range resp.GetNodes() {
			if m := ns.GetNode(); m.GetNodeId() != n.ident.NodeID && m.GetAddress() != "" {
				n.store.SetPeerAddress(m.GetNodeId(), m.GetAddress())
			}
		}
	}
}

// freshDescriptors returns descs (meta's copies) with each replaced by its
// leader's own descriptor, as the heartbeats report it, where that is
// newer: meta's update after a change is best effort and may lag.
func freshDescriptors(descs []*kvpb.RangeDescriptor, hb map[uint64]*nodeStatsEntry) []*kvpb.RangeDescriptor {
	fresh := map[uint64]*kvpb.RangeDescriptor{}
	for _, e := range hb {
		for _, r := range e.status.GetRanges() {
			d := r.GetRangeDescriptor()
			if r.GetRaft().GetState() == "leader" && d.GetGeneration() > fresh[d.GetRangeId()].GetGeneration() {
				fresh[d.GetRangeId()] = d
			}
		}
	}
	for i, d := range descs {
		if f := fresh[d.GetRangeId()]; f != nil && f.GetGeneration() > d.GetGeneration() {
			descs[i] = f
		}
	}
	return descs
}
