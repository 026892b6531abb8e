package node

import (
	"context"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
	"google.golang.org/grpc"
)

// BenchmarkHotInterceptor is the cost the hot-range accounting adds to
// one served Get (sizes, counters, one sample in four), in parallel as on
// a busy node.
func BenchmarkHotInterceptor(b *testing.B) {
	var h hotTracker
	req := &kvpb.GetRequest{Header: &kvpb.RequestHeader{RangeId: 2}, Key: []byte("user/000123")}
	resp := &kvpb.GetResponse{Header: &kvpb.ResponseHeader{RangeId: 2, NodeId: 1}, Found: true, Value: make([]byte, 100)}
	handler := func(context.Context, any) (any, error) { return resp, nil }
	info := &grpc.UnaryServerInfo{FullMethod: "/shale.kv.v1.KV/Get"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h.unaryInterceptor(context.Background(), req, info, handler); err != nil {
				b.Fatal(err)
			}
		}
	})
}
