package node

import (
	"context"
	"maps"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
)

// The placement controller (docs/sharding.md, "Placement").
//
// It runs on every node but acts only on the leader of the meta range,
// which holds the authoritative list of nodes and ranges. Every
// ShardingOptions.PlacementInterval it gathers the nodes' heartbeats
// (heartbeat.go) and then, in order, until MaxMovesPerPass replica moves
// have been started:
//
//  1. repair: a replica on a dead node (not heard from for
//     DeadNodeTimeout) or on a decommissioning one is replaced by a new
//     one on the usable node with the fewest replicas (the leader's
//     replica last: see repairOrder);
//  2. up-replication: a range with fewer voters than ReplicationFactor
//     (and enough usable nodes) gets one more;
//  3. rebalancing: while the usable node with the most replicas has two
//     more than the one with the fewest, a range moves from the first to
//     the second (user ranges only: meta stays where it is unless
//     repaired), the moves of a wave in parallel;
//  4. leader balancing: while a range's leader leads two more ranges than
//     a node holding another voter of it, its leadership moves (the pair
//     furthest apart first).
//
// A move is one ChangeReplicas (add learner, snapshot, promote, remove,
// with joint consensus for the swap), run through the Admin service on
// the range's leader; the leadership leaves a replica before it is
// removed. Snapshots are rate-limited by the transport (--snapshot-rate),
// so moves do not starve foreground traffic. Every decision is made from
// fresh state each pass: a pass interrupted by a crash or a leadership
// change leaves nothing to clean up but possibly a learner, which the
// next ChangeReplicas on that range promotes or the repair step replaces.

// moveTimeout bounds one replica move, so that a move whose new replica
// cannot catch up (its node died meanwhile) does not hold up the pass; the
// learner it leaves is removed by a later pass. At the default snapshot
// rate a 64 MiB range moves in about 2 s.
const moveTimeout = 20 * time.Second

// usable: live (heard from recently, or the controller itself) and not
// decommissioning: a node that may receive replicas and leaders.
type nodeView struct {
	desc     *kvpb.NodeDescriptor
	live     bool // heard from within DeadNodeTimeout (or just started)
	usable   bool
	replicas int
	leaders  int
}

func (n *Node) placementLoop(ctx context.Context) {
	o := &n.cfg.Sharding
	t := time.NewTicker(o.PlacementInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if o.DisablePlacement {
			continue
		}
		meta, err := n.store.Replica(keys.MetaRangeID)
		if err != nil || !meta.IsLeader() {
			continue
		}
		n.placementPass(ctx)
	}
}

// placementPass runs one pass of the controller. It returns the number of
// moves and leadership transfers it made.
func (n *Node) placementPass(ctx context.Context) int {
	o := &n.cfg.Sharding
	nodes, err := n.store.MetaNodes()
	if err != nil {
		return 0
	}
	descs, err := n.store.MetaDescriptors()
	if err != nil {
		return 0
	}
	hb := n.gatherHeartbeats(ctx, nodes)
	now := time.Now()
	views := map[uint64]*nodeView{}
	for _, m := range nodes {
		id := m.GetNodeId()
		last := n.lastSeen(id)
		live := id == n.ident.NodeID || (!last.IsZero() && now.Sub(last) < o.DeadNodeTimeout) ||
			(last.IsZero() && now.Sub(n.started) < o.DeadNodeTimeout)
		_, answered := hb[id]
		views[id] = &nodeView{desc: m, live: live, usable: answered && !m.GetDecommissioning()}
	}
	leaderOf := map[uint64]uint64{}
	for id, e := range hb {
		for rid := range e.leaders {
			leaderOf[rid] = id
			if v := views[id]; v != nil {
				v.leaders++
			}
		}
	}
	// Meta's copies may lag (its update after a change is best effort):
	// the leaders' own descriptors are authoritative.
	descs = freshDescriptors(descs, hb)
	stillLeader := func() bool {
		meta, err := n.store.Replica(keys.MetaRangeID)
		return err == nil && meta.IsLeader()
	}
	for _, d := range descs {
		for _, rd := range d.GetReplicas() {
			if v := views[rd.GetNodeId()]; v != nil {
				v.replicas++
			}
		}
	}
	s := &adminServer{n: n}
	moves := 0
	budget := o.MaxMovesPerPass

	// 1. Repair and drain.
	for _, d := range descs {
		if budget == 0 || !stillLeader() {
			break
		}
		for _, rd := range repairOrder(d, leaderOf[d.GetRangeId()]) {
			v := views[rd.GetNodeId()]
			bad := v == nil || !v.live || v.desc.GetDecommissioning()
			if !bad {
				continue
			}
			target := pickTarget(views, d)
			if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_LEARNER {
				target = 0 // a learner is not replaced, only removed
			}
			if target == 0 {
				// Nowhere to move it: it still goes if it is a learner or
				// enough voters stay.
				if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_LEARNER || voters(d) > o.ReplicationFactor {
					if n.moveReplica(ctx, s, d, rd.GetNodeId(), 0, leaderOf, views) {
						moves++
						budget--
					}
				}
				break
			}
			if n.moveReplica(ctx, s, d, rd.GetNodeId(), target, leaderOf, views) {
				moves++
				budget--
			}
			break // one change per range per pass
		}
	}
	// 2. Up- and down-replication (a move interrupted half way leaves
	// one voter too many).
	for _, d := range descs {
		if budget == 0 || !stillLeader() {
			break
		}
		if l := strayLearner(d); l != 0 {
			// Moves are synchronous within a pass, so a learner seen at
			// its start was left by an interrupted move.
			if n.moveReplica(ctx, s, d, l, 0, leaderOf, views) {
				moves++
				budget--
			}
			continue
		}
		if voters(d) > o.ReplicationFactor {
			var from uint64
			for _, rd := range d.GetReplicas() {
				v := views[rd.GetNodeId()]
				if v != nil && rd.GetNodeId() != leaderOf[d.GetRangeId()] && (from == 0 || v.replicas > views[from].replicas) {
					from = rd.GetNodeId()
				}
			}
			if from != 0 && n.moveReplica(ctx, s, d, from, 0, leaderOf, views) {
				moves++
				budget--
			}
			continue
		}
		if voters(d) >= o.ReplicationFactor {
			continue
		}
		if target := pickTarget(views, d); target != 0 {
			if n.moveReplica(ctx, s, d, 0, target, leaderOf, views) {
				moves++
				budget--
			}
		}
	}
	// 3. Rebalancing, in waves: up to the budget's moves are planned (the
	// most loaded node to the least, each counted as done for the next
	// pick, on distinct ranges) and run in parallel; a move takes a
	// snapshot and a few Raft rounds, mostly waiting, and one at a time
	// thousands of them (nodes joining a cluster of thousands of ranges)
	// took many minutes. A range whose move fails is not tried again this
	// pass.
	failed := map[uint64]bool{}
	type planned struct {
		d        *kvpb.RangeDescriptor
		from, to uint64
	}
	for budget > 0 && stillLeader() {
		var wave []planned
		taken := maps.Clone(failed)
		for len(wave) < budget {
			maxN, minN := extremes(views, func(v *nodeView) int { return v.replicas })
			if maxN == 0 || views[maxN].replicas <= views[minN].replicas+1 {
				break
			}
			d := pickRangeToMove(descs, maxN, minN, leaderOf, taken)
			if d == nil {
				break
			}
			taken[d.GetRangeId()] = true
			views[maxN].replicas--
			views[minN].replicas++
			wave = append(wave, planned{d, maxN, minN})
		}
		if len(wave) == 0 {
			break
		}
		for _, p := range wave { // moveReplica counts what it moves
			views[p.from].replicas++
			views[p.to].replicas--
		}
		budget -= len(wave)
		ok := make([]bool, len(wave))
		var wg sync.WaitGroup
		for i, p := range wave {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok[i] = n.moveReplica(ctx, s, p.d, p.from, p.to, leaderOf, views)
			}()
		}
		wg.Wait()
		for i, p := range wave {
			if ok[i] {
				moves++
				continue
			}
			failed[p.d.GetRangeId()] = true
			// The target may have died since it answered this pass's
			// heartbeat: each further move to it would wait out
			// moveTimeout and hold up the next pass's repairs. Leave it
			// until the next pass looks again.
			views[p.to].usable = false
		}
	}
	// 4. Leader balancing (user ranges: meta's leadership stays, so the
	// controller does not move itself mid-pass).
	for i := 0; i < 2*o.MaxMovesPerPass && stillLeader(); i++ {
		pick, from, to := pickLeaderMove(descs, views, leaderOf, failed)
		if pick == nil {
			break
		}
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := n.adminOf(tctx, s, from).TransferLeader(tctx, &kvpb.TransferLeaderRequest{RangeId: pick.GetRangeId(), TargetNodeId: to})
		cancel()
		if err != nil {
			n.log.Info("placement: leader transfer failed", "range", pick.GetRangeId(), "to", to, "err", err)
			failed[pick.GetRangeId()] = true
			continue
		}
		leaderOf[pick.GetRangeId()] = to
		views[from].leaders--
		views[to].leaders++
		moves++
	}
	// 5. Automatic merges (merger.go).
	if !o.DisableAutoMerge && stillLeader() {
		moves += n.mergePass(ctx, s, descs, hb, now)
	}
	return moves
}

// moveReplica replaces range d's replica on node from with one on node
// to (either may be 0: only add, only remove). If from leads the range
// (and is live), its leadership moves to another voter first. On success
// d is updated to the new descriptor.
func (n *Node) moveReplica(ctx context.Context, s *adminServer, d *kvpb.RangeDescriptor, from, to uint64,
	leaderOf map[uint64]uint64, views map[uint64]*nodeView) bool {
	mctx, cancel := context.WithTimeout(ctx, moveTimeout)
	defer cancel()
	// Moves of different ranges may run in parallel (rebalancing): the
	// maps are shared, each descriptor is the move's own.
	n.placeMu.Lock()
	leader := leaderOf[d.GetRangeId()]
	var other uint64
	if from != 0 && leader == from {
		for _, rd := range d.GetReplicas() {
			v := views[rd.GetNodeId()]
			if rd.GetNodeId() != from && rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_VOTER && v != nil && v.usable {
				other = rd.GetNodeId()
				break
			}
		}
	}
	n.placeMu.Unlock()
	if from != 0 && leader == from {
		if other == 0 {
			return false
		}
		if _, err := n.adminOf(mctx, s, from).TransferLeader(mctx, &kvpb.TransferLeaderRequest{RangeId: d.GetRangeId(), TargetNodeId: other}); err != nil {
			n.log.Info("placement: moving the leader off a replica to remove", "range", d.GetRangeId(), "node", from, "err", err)
			return false
		}
		leader = other
		n.placeMu.Lock()
		leaderOf[d.GetRangeId()] = other
		n.placeMu.Unlock()
	}
	n.log.Info("placement: moving a replica", "range", d.GetRangeId(), "from", from, "to", to, "generation", d.GetGeneration())
	var changes []*kvpb.ReplicaChange
	if to != 0 {
		changes = append(changes, &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: to})
	}
	if from != 0 {
		changes = append(changes, &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_REMOVE, NodeId: from})
	}
	resp, err := n.adminOf(mctx, s, leader).ChangeReplicas(mctx, &kvpb.ChangeReplicasRequest{RangeId: d.GetRangeId(), Changes: changes, ExpectedGeneration: d.GetGeneration()})
	if err == nil {
		// The rest of the pass decides from the new descriptor.
		proto.Reset(d)
		proto.Merge(d, resp.GetRangeDescriptor())
	}
	if err != nil {
		n.log.Info("placement: replica move failed", "range", d.GetRangeId(), "from", from, "to", to, "err", err)
		return false
	}
	n.log.Info("placement: moved a replica", "range", d.GetRangeId(), "from", from, "to", to)
	n.placeMu.Lock()
	defer n.placeMu.Unlock()
	if v := views[from]; v != nil {
		v.replicas--
	}
	if v := views[to]; v != nil {
		v.replicas++
	}
	return true
}

// pickTarget returns the usable node without a replica of d that has the
// fewest replicas (lowest ID on ties), or 0.
func pickTarget(views map[uint64]*nodeView, d *kvpb.RangeDescriptor) uint64 {
	var best uint64
	for _, id := range sortedIDs(views) {
		v := views[id]
		if !v.usable || hasReplicaOn(d, id) {
			continue
		}
		if best == 0 || v.replicas < views[best].replicas {
			best = id
		}
	}
	return best
}

// repairOrder is d's replicas in the order repair looks at them: its
// leader's last. Replacing the leader's replica first moves the
// leadership to a usable voter; when every voter is on a node to drain
// (three nodes removed at once that together hold the range), there is
// none, and trying the leader's replica first, every pass, left the
// range on them for good. Another replica replaced first gives the next
// pass a usable voter to hand the leadership to.
func repairOrder(d *kvpb.RangeDescriptor, leader uint64) []*kvpb.ReplicaDescriptor {
	out := make([]*kvpb.ReplicaDescriptor, 0, len(d.GetReplicas()))
	var last *kvpb.ReplicaDescriptor
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == leader && last == nil {
			last = rd
			continue
		}
		out = append(out, rd)
	}
	if last != nil {
		out = append(out, last)
	}
	return out
}

// pickLeaderMove returns the user range whose leadership moves next, its
// leader and the node it moves to: of every range's leader and usable
// voters, the pair whose leader counts differ most, by at least two
// (lowest range first on ties). nil when no such pair is left.
//
// Looking only at the node that leads the fewest ranges, as the
// controller once did, stalls: the new nodes that lead the fewest often
// hold no replica of the ranges the busiest leader leads (rebalancing
// moves away replicas of ranges the node does not lead, so the busiest
// leader's ranges stay on the first nodes): 6 nodes with 60 ranges
// stayed at 29 leaders on one node against 6 or 7 on each other.
func pickLeaderMove(descs []*kvpb.RangeDescriptor, views map[uint64]*nodeView, leaderOf map[uint64]uint64,
	skip map[uint64]bool) (d *kvpb.RangeDescriptor, from, to uint64) {
	gap := 1
	for _, r := range descs {
		lid := leaderOf[r.GetRangeId()]
		l := views[lid]
		if l == nil || keys.IsMetaRange(r) || skip[r.GetRangeId()] {
			continue
		}
		for _, rd := range r.GetReplicas() {
			v := views[rd.GetNodeId()]
			if rd.GetNodeId() == lid || rd.GetType() != kvpb.ReplicaType_REPLICA_TYPE_VOTER || v == nil || !v.usable {
				continue
			}
			if g := l.leaders - v.leaders; g > gap {
				d, from, to, gap = r, lid, rd.GetNodeId(), g
			}
		}
	}
	return d, from, to
}

// pickRangeToMove returns a user range with a voter on from and no
// replica on to, preferring one from does not lead.
func pickRangeToMove(descs []*kvpb.RangeDescriptor, from, to uint64, leaderOf map[uint64]uint64, skip map[uint64]bool) *kvpb.RangeDescriptor {
	var fallback *kvpb.RangeDescriptor
	for _, d := range descs {
		if keys.IsMetaRange(d) || skip[d.GetRangeId()] || !hasVoterOn(d, from) || hasReplicaOn(d, to) {
			continue
		}
		if leaderOf[d.GetRangeId()] != from {
			return d
		}
		if fallback == nil {
			fallback = d
		}
	}
	return fallback
}

// extremes returns the usable nodes with the largest and smallest f.
func extremes(views map[uint64]*nodeView, f func(*nodeView) int) (maxN, minN uint64) {
	for _, id := range sortedIDs(views) {
		v := views[id]
		if !v.usable {
			continue
		}
		if maxN == 0 || f(v) > f(views[maxN]) {
			maxN = id
		}
		if minN == 0 || f(v) < f(views[minN]) {
			minN = id
		}
	}
	return maxN, minN
}

func sortedIDs(views map[uint64]*nodeView) []uint64 {
	ids := make([]uint64, 0, len(views))
	for id := range views {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func hasReplicaOn(d *kvpb.RangeDescriptor, node uint64) bool {
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == node {
			return true
		}
	}
	return false
}

func hasVoterOn(d *kvpb.RangeDescriptor, node uint64) bool {
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == node && rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_VOTER {
			return true
		}
	}
	return false
}

func voters(d *kvpb.RangeDescriptor) int {
	c := 0
	for _, rd := range d.GetReplicas() {
		if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_VOTER {
			c++
		}
	}
	return c
}

// leaderAdmin is the part of the Admin service placement calls on a
// range's leader.
type leaderAdmin interface {
	ChangeReplicas(context.Context, *kvpb.ChangeReplicasRequest) (*kvpb.ChangeReplicasResponse, error)
	TransferLeader(context.Context, *kvpb.TransferLeaderRequest) (*kvpb.TransferLeaderResponse, error)
}

// remoteAdmin adapts a gRPC client to leaderAdmin.
type remoteAdmin struct{ c kvpb.AdminClient }

func (r remoteAdmin) ChangeReplicas(ctx context.Context, req *kvpb.ChangeReplicasRequest) (*kvpb.ChangeReplicasResponse, error) {
	return r.c.ChangeReplicas(ctx, req)
}

func (r remoteAdmin) TransferLeader(ctx context.Context, req *kvpb.TransferLeaderRequest) (*kvpb.TransferLeaderResponse, error) {
	return r.c.TransferLeader(ctx, req)
}

// adminOf returns the Admin service of node leader, as the heartbeats
// name a range's leader (this node's own, which forwards, when it is this
// node, unknown or unreachable).
func (n *Node) adminOf(ctx context.Context, s *adminServer, leader uint64) leaderAdmin {
	if leader == 0 || leader == n.ident.NodeID {
		return s
	}
	c, err := n.peers.readyAdmin(ctx, leader, 2*time.Second)
	if err != nil {
		return s
	}
	return remoteAdmin{c: c}
}

// strayLearner returns the node of a learner replica of d, or 0.
func strayLearner(d *kvpb.RangeDescriptor) uint64 {
	for _, rd := range d.GetReplicas() {
		if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_LEARNER {
			return rd.GetNodeId()
		}
	}
	return 0
}
