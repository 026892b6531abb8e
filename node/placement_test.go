package node

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

func rangeOn(id uint64, nodes ...uint64) *kvpb.RangeDescriptor {
	d := &kvpb.RangeDescriptor{RangeId: id}
	for i, n := range nodes {
		d.Replicas = append(d.Replicas, &kvpb.ReplicaDescriptor{NodeId: n, ReplicaId: uint64(i + 1)})
	}
	return d
}

func TestPickTargetPrefersTheEmptiestUsableNode(t *testing.T) {
	views := map[uint64]*nodeView{
		1: {usable: true, replicas: 5},
		2: {usable: true, replicas: 5},
		3: {usable: true, replicas: 4},
		4: {usable: true, replicas: 1},
		5: {usable: false, replicas: 0}, // dead or decommissioning
	}
	if got := pickTarget(views, rangeOn(7, 1, 2, 3)); got != 4 {
		t.Fatalf("pickTarget = %d; want 4 (fewest replicas, usable, not holding the range)", got)
	}
	if got := pickTarget(views, rangeOn(7, 1, 2, 4)); got != 3 {
		t.Fatalf("pickTarget = %d; want 3", got)
	}
	if got := pickTarget(views, rangeOn(7, 1, 2, 3, 4)); got != 0 {
		t.Fatalf("pickTarget = %d; want 0 (every usable node holds the range)", got)
	}
	maxN, minN := extremes(views, func(v *nodeView) int { return v.replicas })
	if maxN != 1 || minN != 4 {
		t.Fatalf("extremes = %d, %d; want 1, 4 (the unusable node 5 does not count)", maxN, minN)
	}
}

func TestPickRangeToMove(t *testing.T) {
	descs := []*kvpb.RangeDescriptor{rangeOn(1, 1, 2, 3), rangeOn(2, 1, 2, 3), rangeOn(3, 1, 2, 4), rangeOn(4, 1, 2, 3)}
	leaderOf := map[uint64]uint64{2: 1, 4: 2}
	// Meta (range 1) never moves; range 3 already has node 4; range 2 is
	// led by node 1, so range 4 is preferred.
	if d := pickRangeToMove(descs, 1, 4, leaderOf, nil); d.GetRangeId() != 4 {
		t.Fatalf("picked range %d; want 4", d.GetRangeId())
	}
	if d := pickRangeToMove(descs, 1, 4, leaderOf, map[uint64]bool{4: true}); d.GetRangeId() != 2 {
		t.Fatalf("picked range %d; want 2 (the led one, when nothing else is left)", d.GetRangeId())
	}
	if d := pickRangeToMove(descs, 4, 1, leaderOf, nil); d != nil {
		t.Fatalf("picked range %d from node 4 to node 1, which holds it", d.GetRangeId())
	}
}

func TestLoadTrackerSplitKeyDividesTraffic(t *testing.T) {
	var l loadTracker
	// 90% of the traffic on keys a..., 10% on z...: the median sample is
	// an a-key, so a split there leaves about half the traffic each side.
	for i := 0; i < 10000; i++ {
		k := fmt.Sprintf("a%04d", i%1000)
		if i%10 == 0 {
			k = fmt.Sprintf("z%04d", i)
		}
		l.record(7, []byte(k))
	}
	qps, sample := l.roll(7, time.Now().Add(time.Second))
	if qps <= 0 || len(sample) != loadSampleSize {
		t.Fatalf("roll = %v qps, %d samples", qps, len(sample))
	}
	for i := 1; i < len(sample); i++ {
		if bytes.Compare(sample[i-1], sample[i]) > 0 {
			t.Fatal("sample not sorted")
		}
	}
	if mid := sample[len(sample)/2]; mid[0] != 'a' {
		t.Fatalf("median sample %q; want an a-key (90%% of the traffic)", mid)
	}
	if q, s := l.roll(7, time.Now().Add(2*time.Second)); q != 0 || len(s) != 0 {
		t.Fatalf("a new window starts empty: %v qps, %d samples", q, len(s))
	}
}

// TestPickLeaderMoveLooksBeyondTheLeastLoadedNode: the busiest leader's
// ranges all sit on nodes 1-3 (rebalancing moved replicas of the ranges
// node 1 does not lead), while the new nodes 4-6, leading the fewest,
// hold no replica of them. Leadership still moves off node 1, to a voter
// that leads fewer by two or more; and nowhere once no pair differs by
// two.
func TestPickLeaderMoveLooksBeyondTheLeastLoadedNode(t *testing.T) {
	views := map[uint64]*nodeView{
		1: {usable: true, leaders: 29}, 2: {usable: true, leaders: 7}, 3: {usable: true, leaders: 8},
		4: {usable: true, leaders: 6}, 5: {usable: true, leaders: 6}, 6: {usable: true, leaders: 6},
	}
	descs := []*kvpb.RangeDescriptor{rangeOn(1, 1, 2, 3), rangeOn(2, 1, 2, 3), rangeOn(3, 2, 4, 5), rangeOn(4, 1, 3, 2)}
	leaderOf := map[uint64]uint64{1: 1, 2: 1, 3: 2, 4: 1}
	d, from, to := pickLeaderMove(descs, views, leaderOf, nil)
	if d.GetRangeId() != 2 || from != 1 || to != 2 {
		t.Fatalf("picked range %d from %d to %d; want range 2 from node 1 to node 2 (meta stays; 29 - 7 is the widest gap)", d.GetRangeId(), from, to)
	}
	if d, _, _ := pickLeaderMove(descs, views, leaderOf, map[uint64]bool{2: true, 4: true}); d != nil {
		t.Fatalf("picked range %d; want none (range 3's leader leads 7, its voters 6)", d.GetRangeId())
	}
	views[2].usable = false // decommissioning: takes no leaderships
	if d, from, to := pickLeaderMove(descs, views, leaderOf, nil); d.GetRangeId() != 2 || from != 1 || to != 3 {
		t.Fatalf("picked range %d from %d to %d; want range 2 from node 1 to node 3", d.GetRangeId(), from, to)
	}
	for _, v := range views {
		v.leaders = 10
	}
	views[1].leaders = 11
	if d, _, _ := pickLeaderMove(descs, views, leaderOf, nil); d != nil {
		t.Fatalf("picked range %d; want none (no leader leads two more than a voter of its range)", d.GetRangeId())
	}
}

// TestRepairOrderLeavesTheLeaderLast: when every voter of a range is on a
// node being drained, the leader's replica cannot go first (there is no
// usable voter to hand the leadership to), so repair looks at the others
// first.
func TestRepairOrderLeavesTheLeaderLast(t *testing.T) {
	d := rangeOn(7, 4, 5, 6)
	var got []uint64
	for _, rd := range repairOrder(d, 4) {
		got = append(got, rd.GetNodeId())
	}
	if fmt.Sprint(got) != "[5 6 4]" {
		t.Fatalf("repair order %v; want [5 6 4] (the leader, node 4, last)", got)
	}
	got = got[:0]
	for _, rd := range repairOrder(d, 0) { // leader unknown
		got = append(got, rd.GetNodeId())
	}
	if fmt.Sprint(got) != "[4 5 6]" {
		t.Fatalf("repair order %v; want [4 5 6]", got)
	}
}
