package node

import (
	"context"
	"sync"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// handOffBudget bounds the leadership hand-off of a graceful stop: a
// transfer takes a round trip or two when the target is caught up, and a
// stop must not wait long for a target that is not.
const handOffBudget = 3 * time.Second

// handOffLeadership moves the leadership of every range this node leads to
// another voter before the node stops, so that its ranges keep serving
// without waiting out an election timeout. Each range goes to the voter
// whose node was heard from most recently; ranges with no such voter (a
// one-node range, or every peer silent) are left alone. It returns when
// every transfer finished or failed, or at handOffBudget or ctx's end.
// Callers must hold that no new requests are admitted (the node is
// stopping) and that replication still runs.
func (n *Node) handOffLeadership(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, handOffBudget)
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range n.store.Replicas() {
		st := r.Status()
		if st.State != "leader" {
			continue
		}
		target := n.handOffTarget(st.Descriptor)
		if target == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			if err := n.store.TransferLeader(ctx, st.RangeID, target); err != nil {
				n.log.Warn("stop: leadership hand-off failed; the range elects a leader after its election timeout",
					"range", st.RangeID, "to_node", target, "err", err)
				return
			}
			n.log.Info("stop: handed off leadership", "range", st.RangeID, "to_node", target,
				"took", time.Since(start).Round(time.Millisecond))
		}()
	}
	wg.Wait()
}

// handOffTarget picks the voter, other than this node, whose node was seen
// most recently (within the last 10 s); 0 if there is none.
func (n *Node) handOffTarget(desc *kvpb.RangeDescriptor) uint64 {
	var best uint64
	var bestSeen time.Time
	for _, rd := range desc.GetReplicas() {
		if rd.GetNodeId() == n.ident.NodeID || rd.GetType() != kvpb.ReplicaType_REPLICA_TYPE_VOTER {
			continue
		}
		seen := n.lastSeen(rd.GetNodeId())
		if time.Since(seen) > 10*time.Second {
			continue
		}
		if best == 0 || seen.After(bestSeen) {
			best, bestSeen = rd.GetNodeId(), seen
		}
	}
	return best
}
