package raft

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	raftpb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
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

func histCount(h interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		panic(err)
	}
	return float64(m.GetHistogram().GetSampleCount())
}

// BenchmarkProposeRanges measures what a replicated write costs as the
// key space is cut into more ranges (issue 22): 64 proposers spread their
// writes over 1, 16 or 256 ranges of a 3-node in-process cluster (real
// engines, real gRPC on loopback), the leaders spread over the nodes.
// Besides time and allocations per write it reports the process CPU time
// per write (the three nodes together, from getrusage: it does not
// follow what else the machine runs as time does) and, per write, the
// rounds, log syncs, messages sent, message batches sent (gRPC frames to
// peers), range applies and apply writes of the nodes, and the engine
// records and bytes they write, the data (log entries, user keys) apart
// from the per-range state records (engineBytes).
//
//	go test ./raft -run '^$' -bench ProposeRanges -benchtime 20000x
//
// SHALE_BENCH_ANSWER_NOTICES=1 has followers answer commit notices as
// Raft does (TestingKnobs.AnswerCommitNotices), to measure what not
// answering them saves.
func BenchmarkProposeRanges(b *testing.B) {
	for _, ranges := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("ranges=%d", ranges), func(b *testing.B) {
			benchProposeRanges(b, ranges, 64)
		})
	}
}

func benchProposeRanges(b *testing.B, ranges, clients int) {
	var eng engineBytes
	var sent sentMessages
	c := newBenchCluster(b, func(cfg *Config) {
		cfg.Testing.OnEngineWrite = eng.count
		cfg.Testing.OnSend = sent.count
		cfg.Testing.AnswerCommitNotices = os.Getenv("SHALE_BENCH_ANSWER_NOTICES") == "1"
	})
	ctx := context.Background()
	const space = 1 << 20 // key indexes; range j starts at j*space/ranges
	key := func(i int) []byte { return []byte(fmt.Sprintf("key%07d", i)) }
	rids := []uint64{keys.FirstUserRangeID}
	for j := 1; j < ranges; j++ {
		l := c.leader(rids[j-1])
		_, right, err := l.store.Split(ctx, rids[j-1], key(j*space/ranges))
		if err != nil {
			b.Fatal(err)
		}
		rids = append(rids, right.GetRangeId())
	}
	leaders := make([]atomic.Pointer[Store], ranges)
	ids := c.ids()
	slices.Sort(ids)
	for j, rid := range rids {
		to := ids[j%len(ids)]
		if l := c.leader(rid); l.id != to {
			if err := l.store.TransferLeader(ctx, rid, to); err != nil {
				b.Fatal(err)
			}
		}
		leaders[j].Store(c.storeOf(to))
	}
	value := make([]byte, 100)
	sum := func(f func(*Metrics) prometheus.Counter) float64 {
		var n float64
		for _, s := range c.running() {
			n += counterValue(f(s.metrics))
		}
		return n
	}
	counters := []struct {
		unit string
		f    func(*Metrics) prometheus.Counter
	}{
		{"rounds/op", func(m *Metrics) prometheus.Counter { return m.rounds }},
		{"visits/op", func(m *Metrics) prometheus.Counter { return m.visits }},
		{"inline-appends/op", func(m *Metrics) prometheus.Counter { return m.appendsWithoutWrite }},
		{"syncs/op", func(m *Metrics) prometheus.Counter { return m.logSyncs }},
		{"msgs/op", func(m *Metrics) prometheus.Counter { return m.messagesSent }},
		{"range-applies/op", func(m *Metrics) prometheus.Counter { return m.rangeApplies }},
		{"apply-writes/op", func(m *Metrics) prometheus.Counter { return m.applyWrites }},
		{"batches/op", func(m *Metrics) prometheus.Counter { return m.batchesSent }},
		{"heartbeats/op", func(m *Metrics) prometheus.Counter { return m.heartbeatsSent }},
	}
	logWrites := func() float64 {
		var n float64
		for _, s := range c.running() {
			n += histCount(s.metrics.logWriteSeconds)
		}
		return n
	}
	logWrites0 := logWrites()
	// The rounds a write waits on its leader's node, from its proposal to
	// its apply: the histograms' sums and counts over the nodes.
	writeRounds := func() (sum, n float64) {
		for _, s := range c.running() {
			var m dto.Metric
			if err := s.metrics.writeRounds.Write(&m); err != nil {
				b.Fatal(err)
			}
			sum += m.GetHistogram().GetSampleSum()
			n += float64(m.GetHistogram().GetSampleCount())
		}
		return sum, n
	}
	wrSum0, wrN0 := writeRounds()
	eng.reset()
	sent.reset()
	leaderChanges0 := sum(func(m *Metrics) prometheus.Counter { return m.leaderChanges })
	base := make([]float64, len(counters))
	for i, k := range counters {
		base[i] = sum(k.f)
	}
	var next, retries atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	stopProfile := startBenchProfile(b)
	b.ResetTimer()
	cpu0 := processCPU()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				// A scattered key: i*prime mod space.
				k := int(i * 7919 % space)
				j := k * ranges / space
				cmd := &command.Command{Kind: command.KindPut,
					Mutations: []command.Mutation{{Kind: command.KindPut, Key: key(k), Value: value}}}
				if err := proposeToLeader(ctx, c, leaders, j, rids[j], cmd, &retries); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	cpu := processCPU() - cpu0
	b.StopTimer()
	stopProfile()
	b.ReportMetric(sum(func(m *Metrics) prometheus.Counter { return m.leaderChanges })-leaderChanges0, "leader-changes")
	b.ReportMetric(float64(retries.Load()), "retries")
	b.ReportMetric(cpu.Seconds()*1e6/float64(b.N), "cpu-µs/op")
	for i, k := range counters {
		b.ReportMetric((sum(k.f)-base[i])/float64(b.N), k.unit)
	}
	b.ReportMetric((logWrites()-logWrites0)/float64(b.N), "log-writes/op")
	wrSum, wrN := writeRounds()
	b.ReportMetric((wrSum-wrSum0)/max(wrN-wrN0, 1), "rounds-waited/write")
	eng.report(b)
	sent.report(b)
}

// sentMessages counts the Raft messages the nodes send by kind: appends
// with entries, appends without (a leader telling a follower its commit
// index moved), their answers, heartbeats and their answers, and of the
// appends without entries the commit notices, which are not answered
// (commit_notice.go).
type sentMessages struct {
	n [sentKinds]atomic.Int64
}

const (
	sentApp = iota
	sentAppEmpty
	sentAppResp
	sentHeartbeat
	sentHeartbeatResp
	sentOther
	sentNotice // of sentAppEmpty, those marked commit_only
	sentKinds
)

func (m *sentMessages) reset() {
	for i := range sentKinds {
		m.n[i].Store(0)
	}
}

func (m *sentMessages) count(_ uint64, msgs []*raftrpcpb.RangeMessage) {
	for _, rm := range msgs {
		k := sentOther
		switch msg := rm.GetMessage(); msg.GetType() {
		case raftpb.MsgApp:
			k = sentApp
			if len(msg.GetEntries()) == 0 {
				k = sentAppEmpty
			}
		case raftpb.MsgAppResp:
			k = sentAppResp
		case raftpb.MsgHeartbeat:
			k = sentHeartbeat
		case raftpb.MsgHeartbeatResp:
			k = sentHeartbeatResp
		}
		if rm.GetMessage() != nil {
			m.n[k].Add(1)
		}
		if rm.GetCommitOnly() {
			m.n[sentNotice].Add(1)
		}
	}
}

func (m *sentMessages) report(b *testing.B) {
	// heartbeats/op (the metric) counts the heartbeats.
	for i, unit := range []string{"app/op", "app-empty/op", "app-resp/op", "", "hb-resp/op", "", "notices/op"} {
		if unit != "" {
			b.ReportMetric(float64(m.n[i].Load())/float64(b.N), unit)
		}
	}
}

// engineBytes counts, by kind of record, the records and bytes (key and
// value) the nodes write to the engine: the data a write is for (its log
// entry and its user key; anything else that is not per-range state) and
// the per-range state records written beside it (HardState, applied
// state, MVCC state and stats).
type engineBytes struct {
	recs, bytes [engineKinds]atomic.Int64
}

const (
	engineLog = iota
	engineUser
	engineOther
	engineHardState
	engineApplied
	engineMVCC
	engineKinds
)

func (e *engineBytes) reset() {
	for i := range engineKinds {
		e.recs[i].Store(0)
		e.bytes[i].Store(0)
	}
}

// count classifies b's records (raft/keys: prefix 'r' range_id suffix).
func (e *engineBytes) count(_ uint64, b *storage.Batch) {
	rd, err := storage.NewBatchReader(b.Repr())
	if err != nil {
		return
	}
	for {
		_, k, v, ok := rd.Next()
		if !ok {
			return
		}
		kind := engineOther
		switch {
		case len(k) > 0 && k[0] == keys.UserPrefix:
			kind = engineUser
		case len(k) >= 11 && k[0] == keys.NodeLocalPrefix && k[1] == 'r' && k[10] == 'l':
			kind = engineLog
		case len(k) == 11 && k[0] == keys.NodeLocalPrefix && k[1] == 'r' && k[10] == 'h':
			kind = engineHardState
		case len(k) == 11 && k[0] == keys.RangeLocalPrefix && k[1] == 'r' && k[10] == 'a':
			kind = engineApplied
		case len(k) == 11 && k[0] == keys.RangeLocalPrefix && k[1] == 'r' && (k[10] == 'v' || k[10] == 's'):
			kind = engineMVCC
		}
		e.recs[kind].Add(1)
		e.bytes[kind].Add(int64(len(k) + len(v)))
	}
}

func (e *engineBytes) report(b *testing.B) {
	n := float64(b.N)
	var dataB, stateB, stateR float64
	for i := range engineKinds {
		if i < engineHardState {
			dataB += float64(e.bytes[i].Load())
		} else {
			stateB += float64(e.bytes[i].Load())
			stateR += float64(e.recs[i].Load())
		}
	}
	b.ReportMetric(dataB/n, "data-B/op")
	b.ReportMetric(stateB/n, "state-B/op")
	b.ReportMetric(stateR/n, "state-recs/op")
	b.ReportMetric(float64(e.recs[engineHardState].Load())/n, "hs-recs/op")
	b.ReportMetric(float64(e.recs[engineApplied].Load())/n, "applied-recs/op")
	b.ReportMetric(float64(e.recs[engineMVCC].Load())/n, "mvcc-recs/op")
}

// proposeToLeader proposes cmd to range rid through leaders[j], and
// when that store is no longer the leader (a loaded machine can starve a
// leader's heartbeats into an election), through the new leader. A write
// that failed for want of a leader (not leader, dropped, ambiguous: a
// put of the same value again is harmless here) is tried again for up to
// a minute; retries counts the tries again.
func proposeToLeader(ctx context.Context, c *testCluster, leaders []atomic.Pointer[Store], j int, rid uint64, cmd *command.Command, retries *atomic.Int64) error {
	deadline := time.Now().Add(time.Minute)
	for {
		_, _, err := leaders[j].Load().Propose(ctx, rid, cmd)
		if err == nil || !(errors.Is(err, ErrNotLeader) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrAmbiguous)) ||
			time.Now().After(deadline) {
			return err
		}
		retries.Add(1)
		var nl *NotLeaderError
		if errors.As(err, &nl) && nl.LeaderNodeID != 0 {
			if s := c.storeOf(nl.LeaderNodeID); s != nil {
				leaders[j].Store(s)
				continue
			}
		}
		<-time.After(10 * time.Millisecond) // no leader yet: an election is under way
	}
}

// startBenchProfile starts a CPU profile of the measured part of a
// benchmark, leaving out its setup (256 splits take longer than the
// writes), when SHALE_BENCH_CPUPROFILE names the file to write; it
// returns the function that stops it.
func startBenchProfile(b *testing.B) func() {
	path := os.Getenv("SHALE_BENCH_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// processCPU is the CPU time (user + system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
