package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

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

// BenchmarkAuthorize: what authorization adds to every request on a TLS
// node, by certificate (role from the verified leaf) and by token (a
// SHA-256 and a map lookup).
func BenchmarkAuthorize(b *testing.B) {
	p := newTestPKI(b)
	leaf := p.client(b, "writer").Certificates[0].Leaf
	ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}},
	}}})
	tokFile := filepath.Join(b.TempDir(), "tokens")
	const tok = "rw-0123456789abcdefghijklmnop"
	must(b, os.WriteFile(tokFile, []byte("read-write "+tok+"\n"), 0o600))
	tf, err := newTokenFile(tokFile, slog.New(slog.DiscardHandler))
	must(b, err)
	a := &authorizer{enabled: true, tokens: tf}
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{
		{"certificate", ctx},
		{"token", metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+tok))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := a.authorize(bc.ctx, "/shale.kv.v1.KV/Put"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
