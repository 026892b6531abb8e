package node

import (
	"context"
	"sync"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// A full node hands its leaderships away (docs/operations.md, "A full
// disk"). It refuses the writes of every range it leads, while the other
// voters of those ranges may well have room. So once its disk has been
// full for diskShedAfter, the disk loop moves the leadership of each range
// it leads to a voter whose node says (in a node-only Status) that its
// disk has room. It retries every diskShedInterval while full. Until then,
// and for ranges whose voters are all full too, writes are refused with
// ResourceExhausted. The wait keeps a brief fill (the reserve file
// released and re-created) from moving leaders, and gives the client a
// clear answer first.

const (
	diskShedAfter    = 5 * time.Second
	diskShedInterval = 2 * time.Second
)

// shedLeadership moves the leadership of every range this node leads to a
// voter on a node with room, if there is one.
func (n *Node) shedLeadership(ctx context.Context) {
	room := map[uint64]bool{} // node ID -> its disk has room (asked once per pass)
	hasRoom := func(id uint64) bool {
		if v, ok := room[id]; ok {
			return v
		}
		v := n.peerHasRoom(ctx, id)
		room[id] = v
		return v
	}
	var wg sync.WaitGroup
	for _, r := range n.store.Replicas() {
		if !r.IsLeader() {
			continue
		}
		var target uint64
		for _, rd := range r.Descriptor().GetReplicas() {
			if rd.GetNodeId() != n.ident.NodeID && rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_VOTER && hasRoom(rd.GetNodeId()) {
				target = rd.GetNodeId()
				break
			}
		}
		if target == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tctx, cancel := context.WithTimeout(ctx, diskShedInterval)
			defer cancel()
			if err := n.store.TransferLeader(tctx, r.RangeID(), target); err != nil {
				n.log.Debug("disk full: handing off a leadership", "range", r.RangeID(), "to_node", target, "err", err)
				return
			}
			n.log.Info("disk full: handed off leadership to a node with room", "range", r.RangeID(), "to_node", target)
		}()
	}
	wg.Wait()
}

// peerHasRoom asks node id whether its disk has room.
func (n *Node) peerHasRoom(ctx context.Context, id uint64) bool {
	c, err := n.peers.admin(id)
	if err != nil {
		return false
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := c.Status(forwardCtx(sctx), &kvpb.StatusRequest{NodeOnly: true})
	return err == nil && !st.GetDisk().GetFull()
}
