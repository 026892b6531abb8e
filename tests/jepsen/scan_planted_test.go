package jepsen

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// TestConsistentScanCatchesPlantedBug runs the consistent-scan workload
// against a real cluster with two kinds of readers side by side: correct
// ones, and ones whose client has a planted bug: its Scan and BatchGet
// requests lose their read_timestamp on the way to the node (so every
// page after the first, and every BatchGet group after the first, is read
// at the node's newest state), and the answer comes back claiming the
// timestamp asked for, so the client notices nothing. The checker must
// flag a torn snapshot from the buggy readers, and nothing from the
// correct ones.
func TestConsistentScanCatchesPlantedBug(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping a cluster test in -short mode")
	}
	c := startCluster(t, t.TempDir(), 3, false)
	adm, err := newSession(c, t)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.close()
	good, _, err := setupScanWorkload(adm.get(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if good.unsupported != "" {
		t.Skipf("skipping: %s", good.unsupported)
	}
	bad := &scanWorkload{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	buggy, err := client.Dial(ctx, c.endpoints(), &client.Options{
		RequestTimeout: opTimeout, DisableMultiplexing: true, // unary, through the interceptor
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(dropReadTimestamp)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer buggy.Close()
	buggySess := &session{c: c, t: t, cl: buggy, ver: c.version.Load()}

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var sessions []*session
	start := func(f func(s *session)) {
		s, err := newSession(c, t)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
		wg.Add(1)
		go func() { defer wg.Done(); f(s) }()
	}
	start(func(s *session) { good.writer(wctx, s) })
	start(func(s *session) { good.reader(wctx, s, rand.New(rand.NewPCG(1, 1))) })
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); bad.reader(wctx, buggySess, rand.New(rand.NewPCG(2, uint64(i)))) }()
	}
	// Wait for the checker to flag a torn snapshot from the buggy
	// readers, and for the correct readers to have done enough meanwhile
	// (while the writer went round at least once) to count.
	caught, enough := false, false
	for ctx.Err() == nil {
		caught = bad.torn() > 0
		enough = good.reads.Load() >= 20 && good.asOfs.Load() >= 3 && good.rounds.Load() >= 1
		if caught && enough {
			break
		}
		pause(ctx, 100*time.Millisecond)
	}
	stop()
	wg.Wait()
	for _, s := range sessions {
		s.close()
	}
	nBad, badVs := bad.result()
	nGood, goodVs := good.result()
	t.Logf("writer rounds %d; correct readers: %d reads, %d as-of rereads, %d violations; buggy readers: %d reads, %d violations, e.g. %v",
		good.rounds.Load(), good.reads.Load(), good.asOfs.Load(), nGood, bad.reads.Load(), nBad, first(badVs, 2))
	if !caught {
		t.Errorf("the checker flagged no torn snapshot from the planted bug within two minutes (%d buggy reads checked, %d other violations)", bad.reads.Load(), nBad)
	}
	if !enough {
		t.Errorf("the correct readers did too little to count: %d reads, %d as-of rereads, writer rounds %d", good.reads.Load(), good.asOfs.Load(), good.rounds.Load())
	}
	if nGood > 0 {
		t.Errorf("%d violations by correct readers, e.g. %v", nGood, first(goodVs, 3))
	}
}

// dropReadTimestamp is the planted bug: it sends Scan and BatchGet
// requests without their read_timestamp and puts the timestamp back into
// the answer, as a client that dropped it and a node that ignored it
// would together.
func dropReadTimestamp(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var h *kvpb.RequestHeader
	switch r := req.(type) {
	case *kvpb.ScanRequest:
		h = r.GetHeader()
	case *kvpb.BatchGetRequest:
		h = r.GetHeader()
	}
	asked := h.GetReadTimestamp()
	if asked == nil {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	sent := proto.Clone(req.(proto.Message))
	switch r := sent.(type) {
	case *kvpb.ScanRequest:
		r.Header.ReadTimestamp = nil
	case *kvpb.BatchGetRequest:
		r.Header.ReadTimestamp = nil
	}
	if err := invoker(ctx, method, sent, reply, cc, opts...); err != nil {
		return err
	}
	switch r := reply.(type) {
	case *kvpb.ScanResponse:
		if r.Header == nil {
			r.Header = &kvpb.ResponseHeader{}
		}
		r.Header.ReadTimestamp = asked
	case *kvpb.BatchGetResponse:
		if r.Header == nil {
			r.Header = &kvpb.ResponseHeader{}
		}
		r.Header.ReadTimestamp = asked
	}
	return nil
}
