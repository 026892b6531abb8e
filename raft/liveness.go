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
// sends, every nodeHeartbeatTicks ticks, one node heartbeat to every node
// it shares a range with: a RangeMessage with range 0 and no message,
// batched by the transport with whatever else goes to that node. One
// heartbeat per node pair and a third of an election timeout, however
// many ranges the pair shares.
//
// Liveness is counted in ticks, as Raft counts its election timeout: a
// node from which no batch (heartbeat or not) arrived during ElectionTicks
// ticks in a row is not live. Counting ticks rather than reading the
// clock keeps a node whose own ticker was starved of CPU from finding its
// peers dead when it runs again (the ticker drops the ticks it missed),
// just as its awake ranges do not campaign then.
//
// A quiescent follower whose leader's node is not live is woken
// (tickReplicas), counts the ticks it slept through (wakeLocked), and
// elects a new leader as if the range had never slept.

// nodeHeartbeatTicks is how many ticks apart a node sends its node
// heartbeats: a third of an election timeout (3 of 10 ticks), so that two
// heartbeats in a row may be lost or late before a peer finds this node
// silent for an election timeout. Sending them every tick cost an idle
// node most of its CPU (a message each way per peer and tick, each a
// write, a read and several goroutine wakeups); spacing them does not
// slow failure detection, which counts ElectionTicks ticks from the last
// heartbeat that arrived (a node that dies is found dead at most
// ElectionTicks ticks later, as before).
func nodeHeartbeatTicks(electionTicks int) uint64 {
	return uint64(max(1, electionTicks/3))
}

// heartbeatPeersEvery is how many ticks the set of nodes to heartbeat is
// kept before it is computed again from the replicas' descriptors.
const heartbeatPeersEvery = 10

// peerSilence is what the ticker knows of one peer's liveness.
type peerSilence struct {
	contact time.Time // the peer's last contact as of the last tick
	ticks   int       // ticks in a row without a newer contact
}

// noteSilencesLocked counts, for each of peers, the ticks in a row
// without contact, and publishes the peers silent for an election
// timeout (nodeLive).
// REQUIRES: s.tick.mu.
func (s *Store) noteSilencesLocked(peers []uint64) map[uint64]bool {
	t := &s.tick
	if t.silence == nil {
		t.silence = make(map[uint64]*peerSilence)
	}
	var dead map[uint64]bool
	for _, n := range peers {
		ps := t.silence[n]
		if ps == nil {
			ps = &peerSilence{}
			t.silence[n] = ps
		}
		if c := s.LastContact(n); c.After(ps.contact) {
			ps.contact, ps.ticks = c, 0
			continue
		}
		if ps.ticks++; ps.ticks >= s.cfg.ElectionTicks {
			if dead == nil {
				dead = make(map[uint64]bool, 1)
			}
			dead[n] = true
		}
	}
	if len(dead) > 0 {
		s.deadNodes.Store(&dead)
	} else if s.deadNodes.Load() != nil {
		s.deadNodes.Store(nil)
	}
	return dead
}

// nodeLive reports whether node id is live as of the last tick: it has
// sent this node something within the last ElectionTicks ticks, or the
// ticker does not watch it (a node it shares no range with).
func (s *Store) nodeLive(id uint64) bool {
	d := s.deadNodes.Load()
	return d == nil || !(*d)[id]
}

// heartbeatPeersLocked returns the nodes this node shares a range with,
// recomputing them every heartbeatPeersEvery calls from every replica of
// the store (sleeping ones too: their leaders' nodes are watched).
// REQUIRES: s.tick.mu.
func (s *Store) heartbeatPeersLocked() []uint64 {
	t := &s.tick
	if t.peersAge > 0 && t.peersAge < heartbeatPeersEvery {
		t.peersAge++
		return t.peers
	}
	t.peersAge = 1
	seen := make(map[uint64]struct{}, len(t.peers)+1)
	t.peers = t.peers[:0]
	s.allReplicasLocked()
	defer clear(t.reps)
	for _, r := range t.reps {
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

// sendNodeHeartbeats sends one node heartbeat to each of nodes on the
// first tick and every nodeHeartbeatTicks ticks after it; tick is the
// ticker's count, from 1.
func (s *Store) sendNodeHeartbeats(nodes []uint64, tick uint64) {
	if (tick-1)%nodeHeartbeatTicks(s.cfg.ElectionTicks) != 0 {
		return
	}
	for _, n := range nodes {
		s.transport.Send(n, []*raftrpcpb.RangeMessage{{FromNodeId: s.cfg.NodeID, ToNodeId: n}})
	}
	s.metrics.nodeHeartbeatsSent.Add(float64(len(nodes)))
}

// isNodeHeartbeat reports whether rm is a node heartbeat rather than a
// range's message.
func isNodeHeartbeat(rm *raftrpcpb.RangeMessage) bool {
	return rm.GetRangeId() == 0 && rm.GetMessage() == nil
}
