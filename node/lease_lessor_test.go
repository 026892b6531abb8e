package node

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
)

// TestLessorOnOneNode: on a one-node cluster (the meta leader), bad input
// is refused and changes nothing; a lease's key lives while keep-alives
// come and goes once they stop, no earlier than the TTL after the last
// one was sent; a revoke deletes its key at once; with no lease left the
// lessor is idle, and looks only every lessorIdleTick.
func TestLessorOnOneNode(t *testing.T) {
	tn := startNode(t, "", Config{})
	ctx := ctxT(t)
	lc := kvpb.NewLeaseClient(tn.cc)
	// Until the node leads meta and may serve, lease calls are
	// Unavailable (clients retry).
	for {
		_, err := lc.Leases(ctx, &kvpb.LeaseLeasesRequest{})
		if err == nil {
			break
		}
		if status.Code(err) != codes.Unavailable && status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("Leases on a starting node = %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	for _, ms := range []int64{0, 100, int64((MaxLeaseTTL + time.Second) / time.Millisecond)} {
		if _, err := lc.Grant(ctx, &kvpb.LeaseGrantRequest{TtlMs: ms}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("Grant(%dms) = %v, want InvalidArgument", ms, err)
		}
	}
	if _, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("x"), Value: []byte("v"), Lease: 424242}); status.Code(err) != codes.NotFound {
		t.Fatalf("put with an unknown lease = %v, want NotFound", err)
	}
	if g, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("x")}); err != nil || g.GetFound() {
		t.Fatalf("after the refused put: %v %v", g, err)
	}

	const ttl = time.Second
	g, err := lc.Grant(ctx, &kvpb.LeaseGrantRequest{TtlMs: ttl.Milliseconds()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.Grant(ctx, &kvpb.LeaseGrantRequest{TtlMs: 1000, Id: g.GetId()}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("Grant of an ID in use = %v, want AlreadyExists", err)
	}
	if _, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v"), Lease: g.GetId()}); err != nil {
		t.Fatal(err)
	}
	stream, err := lc.KeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lastSent time.Time
	for i := 0; i < 6; i++ { // 1.5 TTLs of keep-alives
		sent := time.Now()
		if err := stream.Send(&kvpb.LeaseKeepAliveRequest{Id: g.GetId()}); err != nil {
			t.Fatal(err)
		}
		r, err := stream.Recv()
		if err != nil || !r.GetFound() || r.GetTtlMs() != ttl.Milliseconds() {
			t.Fatalf("keep-alive %d: %v %v", i, r, err)
		}
		lastSent = sent
		if g, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k")}); err != nil || !g.GetFound() {
			t.Fatalf("the kept-alive key went: %v %v", g, err)
		}
		time.Sleep(ttl / 4)
	}
	stream.CloseSend()
	for {
		g, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		if !g.GetFound() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if gone := time.Since(lastSent); gone < ttl {
		t.Fatalf("the key went %v after the last keep-alive was sent, before the TTL", gone)
	}
	// The sweep deletes the keys, then the record (one more Raft write).
	for deadline := time.Now().Add(5 * time.Second); ; {
		_, err := lc.TimeToLive(ctx, &kvpb.LeaseTimeToLiveRequest{Id: g.GetId()})
		if status.Code(err) == codes.NotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TimeToLive of the expired lease 5 s after its keys went = %v, want NotFound", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	r, err := lc.Grant(ctx, &kvpb.LeaseGrantRequest{TtlMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("r"), Value: []byte("v"), Lease: r.GetId()}); err != nil {
		t.Fatal(err)
	}
	if rv, err := lc.Revoke(ctx, &kvpb.LeaseRevokeRequest{Id: r.GetId()}); err != nil || rv.GetKeysDeleted() != 1 {
		t.Fatalf("Revoke = %v, %v; want 1 key deleted", rv, err)
	}
	if g, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("r")}); err != nil || g.GetFound() {
		t.Fatalf("after the revoke: %v %v", g, err)
	}
	for !tn.n.lessor.idle() {
		if ctx.Err() != nil {
			t.Fatal("the lessor is not idle with no lease left")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Its next pass finds it idle; from then on one a second, not one
	// every lessorTick.
	time.Sleep(2 * lessorTick)
	before := tn.n.lessor.passes.Load()
	time.Sleep(lessorIdleTick)
	if p := tn.n.lessor.passes.Load() - before; p > 2 {
		t.Errorf("the idle lessor made %d passes in %v, want at most 2", p, lessorIdleTick)
	}
}
