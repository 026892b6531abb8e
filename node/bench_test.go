package node

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
)

// Benchmarks of one node over real gRPC on loopback: the cost of a request
// end to end (client stub, HTTP/2, validation, engine). Parallel clients
// show the engine's group commit at work on synced writes.

// BenchmarkPutSync: synced 100-byte puts from GOMAXPROCS*8 concurrent
// callers; concurrent writes share fsyncs.
func BenchmarkPutSync(b *testing.B) {
	tn := startNode(b, "", Config{})
	value := make([]byte, 100)
	var seq atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := fmt.Appendf(nil, "%016d", seq.Add(1))
			if _, err := tn.kv.Put(b.Context(), &kvpb.PutRequest{Key: k, Value: value}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkGet: point reads of 100-byte values from parallel callers.
func BenchmarkGet(b *testing.B) {
	tn := startNode(b, "", Config{})
	const n = 10_000
	muts := make([]*kvpb.Mutation, 0, 1000)
	for i := 0; i < n; i++ {
		muts = append(muts, putOp(fmt.Appendf(nil, "%016d", i), make([]byte, 100)))
		if len(muts) == cap(muts) {
			if _, err := tn.kv.Batch(b.Context(), &kvpb.BatchRequest{Mutations: muts}); err != nil {
				b.Fatal(err)
			}
			muts = muts[:0]
		}
	}
	var seq atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := fmt.Appendf(nil, "%016d", seq.Add(7919)%n)
			resp, err := tn.kv.Get(b.Context(), &kvpb.GetRequest{Key: k})
			if err != nil || !resp.Found {
				b.Errorf("Get(%s) = %v, %v", k, resp, err)
				return
			}
		}
	})
}
