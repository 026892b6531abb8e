package node

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/shaledb/shale/api/flowcontrol"
)

// The node's server keeps static flow-control windows: 100 small calls
// from a client that does not probe draw no PING from the node (with
// gRPC's dynamic windows it sends one, and a WINDOW_UPDATE, for nearly
// every request on a quiet connection; docs/put-cost.md).
func TestServerSendsNoBandwidthProbes(t *testing.T) {
	tn := startNode(t, "", Config{})
	var pc flowcontrol.ProbeCounter
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(pc.Dialer())}, flowcontrol.DialOptions()...)
	cc, err := grpc.NewClient("passthrough:///"+strings.TrimPrefix(tn.cc.Target(), "passthrough:///"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	for i := 0; i < 100; i++ {
		if _, err := hc.Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if sp, cp, _ := pc.Counts(); sp != 0 || cp != 0 {
		t.Errorf("over 100 calls the node sent %d PINGs and the client %d; want none", sp, cp)
	}
}
