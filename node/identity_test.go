package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
)

func TestClusterToJoin(t *testing.T) {
	resp := &kvpb.StatusResponse{ClusterId: "shale-1", Members: []*kvpb.NodeDescriptor{
		{NodeId: 1, Address: "127.0.0.1:1", Started: true},
		{NodeId: 2, Address: "127.0.0.1:2"},
		{NodeId: 3, Address: "127.0.0.1:3", Started: true},
	}}
	for _, tc := range []struct {
		self uint64
		addr string
		want error
	}{
		{2, "127.0.0.1:2", nil},               // listed, never served: may bootstrap
		{3, "127.0.0.1:3", errAlreadyStarted}, // served before: its votes are gone
		{2, "127.0.0.1:9", errNotAMember},     // another node at our ID
		{4, "127.0.0.1:4", errNotAMember},     // not in the registry
		{2, "", nil},                          // address unknown: judged by ID
	} {
		err := clusterToJoin(resp, tc.self, tc.addr)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("clusterToJoin(node %d at %q) = %v, want %v", tc.self, tc.addr, err, tc.want)
		}
	}
}

func TestNewClusterIDIsRandom(t *testing.T) {
	a, b := newClusterID(), newClusterID()
	if a == b || !strings.HasPrefix(a, "shale-") || len(a) != len("shale-")+16 {
		t.Fatalf("newClusterID gave %q and %q", a, b)
	}
}

func TestSeedIsLowestID(t *testing.T) {
	members := []*kvpb.NodeDescriptor{{NodeId: 3}, {NodeId: 1}, {NodeId: 2}}
	if got := seedOf(members).GetNodeId(); got != 1 {
		t.Fatalf("seedOf = node %d, want node 1", got)
	}
}
