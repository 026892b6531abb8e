package node

import (
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
)

// TestKeepAliveStreamAnswersInOrder: a KeepAlive stream carrying many
// leases' renewals, sent without waiting for answers (so the server
// renews what has queued together), answers each request in order, a
// lease that does not exist with found false; KeepAliveBatch answers a
// batch the same way and refuses an empty one.
func TestKeepAliveStreamAnswersInOrder(t *testing.T) {
	tn := startNode(t, "", Config{})
	ctx := ctxT(t)
	lc := kvpb.NewLeaseClient(tn.cc)
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
	var ids []uint64
	for range 3 {
		g, err := lc.Grant(ctx, &kvpb.LeaseGrantRequest{TtlMs: 30_000})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.GetId())
	}
	ids = append(ids, 424242) // never granted
	stream, err := lc.KeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 400
	for i := range n {
		if err := stream.Send(&kvpb.LeaseKeepAliveRequest{Id: ids[i%len(ids)]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		id := ids[i%len(ids)]
		if r.GetId() != id || r.GetFound() != (id != 424242) {
			t.Fatalf("answer %d = %v, want lease %d found %v", i, r, id, id != 424242)
		}
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after the answers: %v, want the stream's end", err)
	}

	ic := kvpb.NewLeaseInternalClient(tn.cc)
	reqs := []*kvpb.LeaseKeepAliveRequest{{Id: ids[3]}, {Id: ids[0]}}
	resp, err := ic.KeepAliveBatch(ctx, &kvpb.LeaseKeepAliveBatchRequest{Requests: reqs})
	if err != nil || len(resp.GetResponses()) != 2 || resp.GetResponses()[0].GetFound() || !resp.GetResponses()[1].GetFound() {
		t.Fatalf("KeepAliveBatch = %v, %v", resp, err)
	}
	if _, err := ic.KeepAliveBatch(ctx, &kvpb.LeaseKeepAliveBatchRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty KeepAliveBatch = %v, want InvalidArgument", err)
	}
}
