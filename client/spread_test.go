package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// TestSpreadTarget: bounded-staleness reads go to every replica of a
// range in turn (learners too), not to the leader alone, and pass over
// suspects and replicas with no known address.
func TestSpreadTarget(t *testing.T) {
	c := &Client{cache: newRangeCache()}
	d := desc(2, 1, "", "")
	for id := uint64(1); id <= 4; id++ {
		typ := kvpb.ReplicaType_REPLICA_TYPE_VOTER
		if id == 4 {
			typ = kvpb.ReplicaType_REPLICA_TYPE_LEARNER
		}
		d.Replicas = append(d.Replicas, &kvpb.ReplicaDescriptor{NodeId: id, ReplicaId: id, Type: typ})
		if id != 3 { // node 3's address is unknown
			c.cache.addNode(&kvpb.NodeDescriptor{NodeId: id, Address: fmt.Sprintf("n%d:1", id)})
		}
	}
	c.cache.insert(d, 1)
	ent := c.cache.entry(2)
	count := map[string]int{}
	for range 300 {
		count[c.spreadTarget(ent, "leader")]++
	}
	if len(count) != 3 || count["n1:1"] < 60 || count["n2:1"] < 60 || count["n4:1"] < 60 {
		t.Fatalf("300 reads went to %v; want n1, n2 and n4 each a fair share", count)
	}
	c.suspects.mark("n2:1", time.Minute)
	clear(count)
	for range 300 {
		count[c.spreadTarget(ent, "leader")]++
	}
	if count["n2:1"] != 0 || len(count) != 2 {
		t.Fatalf("with n2 suspect, reads went to %v", count)
	}
	if got := c.spreadTarget(&rangeEntry{desc: desc(3, 1, "", "")}, "leader"); got != "leader" {
		t.Fatalf("a range with no replicas known: %q, want the fallback", got)
	}
}
