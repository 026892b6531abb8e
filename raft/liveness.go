package raft

import (
	"slices"
	"time"

	"github.com/shaledb/shale/api/raftrpcpb"
)

// Node liveness for quiescent ranges (docs/replication.md, "Quiescence").
//
// A range at rest sends no Raft heartbeats, so its followers cannot tell
// from the range whether their leader is still there. Instead every node
// sends, each tick, one node heartbeat to every node it shares a range
// with: a RangeMessage with range 0 and no message, batched by the
// transport with whatever else goes to that node. Any batch received from
// a node (heartbeat or not) counts it live for livenessTimeout. One
// heartbeat per node pair and tick, however many ranges the pair shares.
//
// A quiescent follower whose leader's node is no longer live is woken
// (tickReplicas), counts the time it slept as ticks (wakeLocked), and
// elects a new leader as if the range had never slept.

// heartbeatPeersEvery is how many ticks the set of nodes to heartbeat is
// kept before it is computed again from the replicas' descriptors.
const heartbeatPeersEvery = 10

// livenessTimeout is how long after the last batch from a node it is
// still counted live: one election timeout, the time a follower of an
// awake range waits for its leader before campaigning.
func (s *Store) livenessTimeout() time.Duration { return s.cfg.electionTimeout() }

// nodeLive reports whether node id sent this node anything within the
// liveness timeout before now.
func (s *Store) nodeLive(id uint64, now time.Time) bool {
	last := s.LastContact(id)
	return !last.IsZero() && now.Sub(last) < s.livenessTimeout()
}

// heartbeatPeersLocked returns the nodes this node shares a range with,
// recomputing them every heartbeatPeersEvery calls from reps (every
// replica of the store).
// REQUIRES: s.tick.mu.
func (s *Store) heartbeatPeersLocked(reps []*Replica) []uint64 {
	t := &s.tick
	if t.peersAge > 0 && t.peersAge < heartbeatPeersEvery {
		t.peersAge++
		return t.peers
	}
	t.peersAge = 1
	seen := make(map[uint64]struct{}, len(t.peers)+1)
	t.peers = t.peers[:0]
	for _, r := range reps {
		for _, rd := range r.Descriptor().GetReplicas() {
			n := rd.GetNodeId()
			if n == s.cfg.NodeID {
				continue
			}
			if _, ok := seen[n]; !ok {
				seen[n] = struct{}{}
				t.peers = append(t.peers, n)
			}
		}
	}
	slices.Sort(t.peers) // a deterministic send order for the simulator
	return t.peers
}

// sendNodeHeartbeats sends one node heartbeat to each of nodes.
func (s *Store) sendNodeHeartbeats(nodes []uint64) {
	for _, n := range nodes {
		s.transport.Send(n, []*raftrpcpb.RangeMessage{{FromNodeId: s.cfg.NodeID, ToNodeId: n}})
	}
}

// isNodeHeartbeat reports whether rm is a node heartbeat rather than a
// range's message.
func isNodeHeartbeat(rm *raftrpcpb.RangeMessage) bool {
	return rm.GetRangeId() == 0 && rm.GetMessage() == nil
}
