package flowcontrol

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// probesPer200Calls makes 200 small unary calls over one connection between
// a server and a client built with the given options and returns the PINGs
// each side sent (keepalive is off, so every PING is a bandwidth probe).
func probesPer200Calls(t *testing.T, sopts []grpc.ServerOption, dopts []grpc.DialOption) (serverPings, clientPings, updates int) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(sopts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()

	var pc ProbeCounter
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(pc.Dialer())}, dopts...)
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	for i := 0; i < 200; i++ {
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	return pc.Counts()
}

// With the static windows neither end probes the connection's bandwidth:
// no PING per call (gRPC's dynamic windows send one, with a WINDOW_UPDATE,
// for nearly every small message on a quiet connection, and the other end
// answers each).
func TestStaticWindowsSendNoProbes(t *testing.T) {
	sp, cp, updates := probesPer200Calls(t, ServerOptions(), DialOptions())
	if sp != 0 || cp != 0 {
		t.Errorf("static windows: server sent %d PINGs, client %d, over 200 calls; want none", sp, cp)
	}
	// A window update per quarter of a window read: none for 200 small
	// calls beyond the connection's first.
	if updates > 2 {
		t.Errorf("static windows: %d WINDOW_UPDATEs over 200 calls; want at most the 2 opening ones", updates)
	}

	// The default (dynamic) windows, for contrast: this is what the
	// options remove.
	sp, cp, _ = probesPer200Calls(t, nil, nil)
	if sp+cp == 0 {
		t.Logf("dynamic windows sent no probes over 200 calls (gRPC's behaviour changed?)")
	}
	t.Logf("dynamic windows: server %d PINGs, client %d, over 200 calls", sp, cp)
}
