package node

import (
	"fmt"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/shaledb/shale/api/kvpb"
)

// The cost of security: the same requests as BenchmarkPutSync and
// BenchmarkGet, over TLS 1.3 with a client certificate, each request
// authorized by role. Compare with the plaintext benchmarks.

func startBenchTLSNode(b *testing.B) kvpb.KVClient {
	p := newTestPKI(b)
	tn := startNode(b, "", Config{Security: SecurityConfig{TLS: p.files()}})
	cc, err := grpc.NewClient(tn.cc.Target(), grpc.WithTransportCredentials(credentials.NewTLS(p.client(b, "admin"))))
	must(b, err)
	b.Cleanup(func() { cc.Close() })
	return kvpb.NewKVClient(cc)
}

func BenchmarkPutSyncTLS(b *testing.B) {
	kv := startBenchTLSNode(b)
	value := make([]byte, 100)
	var seq atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := fmt.Appendf(nil, "%016d", seq.Add(1))
			if _, err := kv.Put(b.Context(), &kvpb.PutRequest{Key: k, Value: value}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkGetTLS(b *testing.B) {
	kv := startBenchTLSNode(b)
	const n = 10_000
	muts := make([]*kvpb.Mutation, 0, 1000)
	for i := 0; i < n; i++ {
		muts = append(muts, putOp(fmt.Appendf(nil, "%016d", i), make([]byte, 100)))
		if len(muts) == cap(muts) {
			if _, err := kv.Batch(b.Context(), &kvpb.BatchRequest{Mutations: muts}); err != nil {
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
			resp, err := kv.Get(b.Context(), &kvpb.GetRequest{Key: k})
			if err != nil || !resp.Found {
				b.Errorf("Get(%s) = %v, %v", k, resp, err)
				return
			}
		}
	})
}
