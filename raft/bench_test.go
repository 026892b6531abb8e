package raft

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm/command"
)

// BenchmarkPropose measures replicated writes on a 3-node in-process
// cluster (real engines, real gRPC on loopback): 64 concurrent proposers,
// 16-byte keys and 100-byte values, each write acknowledged after a quorum
// fsync'd it and the leader applied it.
func BenchmarkPropose(b *testing.B) {
	for _, clients := range []int{1, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			benchPropose(b, clients)
		})
	}
}

func benchPropose(b *testing.B, clients int) {
	c := newBenchCluster(b, nil)
	l := c.leader(keys.FirstUserRangeID)
	value := make([]byte, 100)
	var next atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	b.SetBytes(116)
	b.ResetTimer()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				cmd := &command.Command{Kind: command.KindPut,
					Mutations: []command.Mutation{{Kind: command.KindPut, Key: []byte(fmt.Sprintf("key%013d", i)), Value: value}}}
				if _, _, err := l.store.Propose(ctx, keys.FirstUserRangeID, cmd); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(counterValue(l.store.metrics.logSyncs)/float64(b.N), "leader-syncs/op")
	b.ReportMetric(counterValue(l.store.metrics.rounds)/float64(b.N), "leader-rounds/op")
	b.ReportMetric(histMean(l.store.metrics.logWriteSeconds)*1e6, "leader-logwrite-µs")
}

// BenchmarkReadBarrier measures linearizable read barriers on the leader
// (lease reads once the lease is held) with 64 concurrent readers.
func BenchmarkReadBarrier(b *testing.B) {
	for _, lease := range []bool{true, false} {
		b.Run(fmt.Sprintf("lease=%v", lease), func(b *testing.B) {
			c := newBenchCluster(b, func(cfg *Config) { cfg.DisableLeaseReads = !lease })
			l := c.leader(keys.FirstUserRangeID)
			r, _ := l.store.Replica(keys.FirstUserRangeID)
			ctx := context.Background()
			if _, err := c.put(ctx, keys.FirstUserRangeID, "k", "v"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := r.ReadBarrier(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// newBenchCluster runs a cluster with production timings (100 ms ticks).
func newBenchCluster(b *testing.B, tweak func(*Config)) *testCluster {
	b.Helper()
	return newTestCluster(b, 3, func(cfg *Config) {
		cfg.TickInterval = 100 * time.Millisecond
		if tweak != nil {
			tweak(cfg)
		}
	})
}

func histMean(h interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		panic(err)
	}
	if m.GetHistogram().GetSampleCount() == 0 {
		return 0
	}
	return m.GetHistogram().GetSampleSum() / float64(m.GetHistogram().GetSampleCount())
}
