package tests

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// BenchmarkShardingScale loads keys through the client into a 3-node
// cluster and reports the write throughput of each tenth of the load with
// the number of ranges at its end, then the replicas per node. Its runs:
// one-range (one user range throughout, automatic splits off),
// presplit-N (N ranges split at even key intervals before the load, their
// leaders spread over the nodes; any N >= 2), and splitting (automatic
// splits at a small size: ranges multiply during the load).
//
//	SHALE_SCALE_KEYS=1000000 go test ./tests -run '^$' -bench ShardingScale -benchtime 1x -v
//
// SHALE_SCALE_KEYS (default 200000) is the number of keys per run,
// SHALE_SCALE_SPLIT the split size and memtable size in bytes (default
// 2 MiB), SHALE_SCALE_WORKERS the concurrent writers (default 64),
// SHALE_SCALE_BATCH the keys per write (default 1: Put; more: WriteMany,
// which groups them by range), SHALE_SCALE_RUNS the runs to make (default
// "one-range,presplit-16,splitting"), SHALE_SCALE_PPROF a directory to
// write a CPU profile of every node into, taken early in each run. Keys
// are 16 bytes in random order, values 100 bytes; the Raft tick is the
// production one (100 ms). Each run reports its
// rate and the node CPU time (user + system of the three node processes,
// from /proc) per key written; the last lines compare every run with the
// first: the rate's ratio, which follows whatever else the machine runs,
// and CPU per key, which does not. docs/benchmarks.md, "Scale", records
// the results.
func BenchmarkShardingScale(b *testing.B) {
	keys := envInt("SHALE_SCALE_KEYS", 200000)
	split := envInt("SHALE_SCALE_SPLIT", 2<<20)
	workers := envInt("SHALE_SCALE_WORKERS", 64)
	batch := envInt("SHALE_SCALE_BATCH", 1)
	runs := os.Getenv("SHALE_SCALE_RUNS")
	if runs == "" {
		runs = "one-range,presplit-16,splitting"
	}
	for i := 0; i < b.N; i++ {
		var results []scaleResult
		for _, run := range strings.Split(runs, ",") {
			var res scaleResult
			switch {
			case run == "one-range":
				b.Run(run, func(b *testing.B) { res = scaleRun(b, keys, split, workers, batch, false, 0) })
			case strings.HasPrefix(run, "presplit-"):
				n, err := strconv.Atoi(strings.TrimPrefix(run, "presplit-"))
				if err != nil || n < 2 {
					b.Fatalf("SHALE_SCALE_RUNS: bad run %q (presplit-N, N >= 2 ranges)", run)
				}
				b.Run(run, func(b *testing.B) { res = scaleRun(b, keys, split, workers, batch, false, n) })
			case run == "splitting":
				b.Run(run, func(b *testing.B) { res = scaleRun(b, keys, split, workers, batch, true, 0) })
			default:
				b.Fatalf("SHALE_SCALE_RUNS: unknown run %q (one-range, presplit-N, splitting)", run)
			}
			res.run = run
			results = append(results, res)
		}
		for _, r := range results {
			b.Logf("%-14s %9.0f keys/s (%.2fx %s), %6.1f µs of node CPU per key (%.2fx)", r.run, r.rate,
				r.rate/results[0].rate, results[0].run, r.cpuPerKey*1e6, r.cpuPerKey/results[0].cpuPerKey)
		}
	}
}

// scaleResult is what one run of BenchmarkShardingScale measured.
type scaleResult struct {
	run       string
	rate      float64 // keys written per second
	cpuPerKey float64 // node CPU seconds per key written
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// scaleRun loads keys once: with automatic splits (auto), or into
// presplit ranges cut at even key intervals before the load (0: one
// range).
func scaleRun(b *testing.B, keys, split, workers, batch int, auto bool, presplit int) scaleResult {
	flags := []string{
		// The production tick: thousands of busy ranges each ticking and
		// heartbeating at the harness's 50 ms starve a shared machine
		// into elections (4,096 ranges lost their leaders on a busy one).
		"--raft-tick", "100ms",
		"--split-check-interval", "1s", "--split-size", strconv.Itoa(split), "--split-qps", "-1",
		"--disable-placement=false", "--placement-interval", "2s",
		// Many leadership transfers per pass, so that thousands of
		// presplit ranges have their leaders spread before the load.
		"--placement-max-moves", "64",
		// Small memtables, so that the size estimate (SST files only)
		// follows the load closely; the same for every run.
		"--engine-write-buffer-size", strconv.Itoa(split)}
	if auto {
		flags = append(flags, "--disable-auto-split=false")
	}
	if os.Getenv("SHALE_SCALE_PPROF") != "" {
		flags = append(flags, "--pprof") // profiles are off unless asked for
	}
	c := newCluster(b, 3, flags...)
	cl := c.client()
	if presplit > 0 {
		start := time.Now()
		splitAt(b, cl, presplit, func(i int) string { return fmt.Sprintf("key-%012d", i*keys/presplit) })
		// Placement spreads the leaders: wait until no node leads more
		// than 1.1x (or 2 more than) another, for at most 10 minutes.
		var per map[uint64]int
		deadline := time.Now().Add(10 * time.Minute)
		for time.Now().Before(deadline) {
			per = leadersPerNode(cl)
			lo, hi := 1<<30, 0
			for _, cn := range c.all() {
				lo, hi = min(lo, per[cn.id]), max(hi, per[cn.id])
			}
			if hi <= lo+2 || float64(hi) <= 1.1*float64(lo) {
				break
			}
			time.Sleep(time.Second)
		}
		b.Logf("split into %d ranges, leaders per node %v, after %v", presplit, per, time.Since(start).Round(time.Second))
	}
	value := make([]byte, 100)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	var next, done, failed atomic.Int64
	perm := rand.New(rand.NewPCG(1, 2))
	order := perm.Perm(keys)
	base := map[string]float64{}
	for _, name := range []string{"shale_raft_rounds_total", "shale_raft_log_syncs_total", "shale_raft_messages_sent_total",
		"shale_raft_range_applies_total", "shale_raft_apply_writes_total", "shale_raft_transport_batches_sent_total",
		"shale_raft_replica_visits_total", "shale_raft_appends_without_write_total",
		"shale_raft_write_rounds_sum", "shale_raft_write_rounds_count"} {
		for _, cn := range c.all() {
			base[name] += c.metric(cn.id, name)
		}
	}
	start, startCPU := time.Now(), c.cpuSeconds()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			muts := make([]client.Mutation, 0, batch)
			for {
				hi := next.Add(int64(batch))
				lo := hi - int64(batch)
				if lo >= int64(keys) {
					return
				}
				hi = min(hi, int64(keys))
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				var err error
				if batch == 1 {
					err = cl.Put(ctx, []byte(fmt.Sprintf("key-%012d", order[lo])), value)
				} else {
					muts = muts[:0]
					for _, i := range order[lo:hi] {
						muts = append(muts, client.PutOp([]byte(fmt.Sprintf("key-%012d", i)), value))
					}
					err = cl.WriteMany(ctx, muts...)
				}
				cancel()
				if err != nil {
					if n := failed.Add(hi - lo); n <= int64(5*batch) {
						b.Logf("a write of %d keys failed after %v: %v", hi-lo, time.Since(start).Round(time.Millisecond), err)
					}
					continue
				}
				done.Add(hi - lo)
			}
		}()
	}
	var prof sync.WaitGroup
	if dir := os.Getenv("SHALE_SCALE_PPROF"); dir != "" {
		prof.Add(1)
		go func() {
			defer prof.Done()
			scaleProfile(b, c, dir, b.Name())
		}()
	}
	// Report every tenth of the load.
	// Besides keys/s, which follows whatever else the machine runs, each
	// slice reports the nodes' CPU time per key written, which does not.
	slice := int64(keys / 10)
	last, lastT, lastCPU := int64(0), start, startCPU
	for {
		time.Sleep(200 * time.Millisecond)
		d := done.Load() + failed.Load()
		if d-last >= slice || d >= int64(keys) {
			now, cpu := time.Now(), c.cpuSeconds()
			ranges := rangeCountTB(cl)
			b.Logf("keys %8d-%8d: %8.0f keys/s, %5.1f µs of node CPU per key, %d ranges", last, d,
				float64(d-last)/now.Sub(lastT).Seconds(), (cpu-lastCPU)*1e6/float64(max(d-last, 1)), ranges)
			last, lastT, lastCPU = d, now, cpu
		}
		if d >= int64(keys) {
			break
		}
	}
	wg.Wait()
	el := time.Since(start)
	res := scaleResult{rate: float64(done.Load()) / el.Seconds(),
		cpuPerKey: (c.cpuSeconds() - startCPU) / float64(max(done.Load(), 1))}
	prof.Wait()
	b.ReportMetric(res.rate, "keys/s")
	b.ReportMetric(res.cpuPerKey*1e6, "node-µs/key")
	b.Logf("%d keys in %v (%.0f keys/s, %.1f µs of node CPU per key), %d failed", done.Load(), el.Round(time.Millisecond),
		res.rate, res.cpuPerKey*1e6, failed.Load())
	// How many ranges share an apply write, and how many proposals a
	// leader change left without an outcome (-1: the binary predates
	// the metric).
	// And what the engines wrote to their files: Raft log entries that
	// outlive a memtable are flushed and compacted with the data.
	var writes, applies, overwritten, flushed, compacted, truncations, snapshots float64
	// Per key written: the per-round and per-range work the nodes did
	// (summed over the nodes, since the start of the load), which says
	// where CPU per key goes as ranges multiply.
	perKey := func(name string) float64 {
		var n float64
		for _, cn := range c.all() {
			n += c.metric(cn.id, name)
		}
		return (n - base[name]) / float64(max(done.Load(), 1))
	}
	b.Logf("per key written: %.3f rounds, %.3f log syncs, %.3f messages sent, %.3f range applies, %.3f apply writes, %.3f batches to peers",
		perKey("shale_raft_rounds_total"), perKey("shale_raft_log_syncs_total"), perKey("shale_raft_messages_sent_total"),
		perKey("shale_raft_range_applies_total"), perKey("shale_raft_apply_writes_total"), perKey("shale_raft_transport_batches_sent_total"))
	b.Logf("per key written: %.3f replica visits, %.3f appends completed without the log writer (0: a binary without the metrics)",
		perKey("shale_raft_replica_visits_total"), perKey("shale_raft_appends_without_write_total"))
	if n := perKey("shale_raft_write_rounds_count"); n > 0 {
		b.Logf("a write waited %.1f rounds of its leader's node from proposal to apply", perKey("shale_raft_write_rounds_sum")/n)
	}
	for _, cn := range c.all() {
		writes += c.metric(cn.id, "shale_raft_apply_writes_total")
		applies += c.metric(cn.id, "shale_raft_range_applies_total")
		overwritten += c.metric(cn.id, "shale_raft_proposals_overwritten_total")
		flushed += c.metric(cn.id, "shale_engine_flush_bytes_written_total")
		compacted += c.metric(cn.id, "shale_engine_compaction_bytes_written_total")
		truncations += c.metric(cn.id, "shale_raft_log_truncations_total")
		snapshots += c.metric(cn.id, "shale_raft_snapshots_sent_total")
	}
	b.Logf("apply writes %.0f for %.0f range applies; %.0f proposals found overwritten", writes, applies, overwritten)
	b.Logf("engines: %.0f MB flushed, %.0f MB compacted; %.0f log truncations; %.0f snapshots sent",
		flushed/1e6, compacted/1e6, truncations, snapshots)
	// Let placement settle, then report the balance.
	time.Sleep(6 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := cl.Ranges(ctx)
	if err != nil {
		b.Fatal(err)
	}
	per, leaders := map[uint64]int{}, map[uint64]int{}
	for _, r := range rs.GetRanges() {
		for _, rd := range r.GetRangeDescriptor().GetReplicas() {
			per[rd.GetNodeId()]++
		}
		leaders[r.GetLeaderNodeId()]++
	}
	lo, hi := 1<<30, 0
	for _, n := range per {
		lo, hi = min(lo, n), max(hi, n)
	}
	b.Logf("%d ranges; replicas per node %v (max/min %.2f); leaders per node %v",
		len(rs.GetRanges()), per, float64(hi)/float64(lo), leaders)
	b.ReportMetric(float64(len(rs.GetRanges())), "ranges")
	b.ReportMetric(float64(hi)/float64(lo), "max/min-replicas")
	return res
}

// leadersPerNode is how many ranges each node leads, per meta's status of
// the ranges (nil when meta does not answer).
func leadersPerNode(cl *client.Client) map[uint64]int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := cl.Ranges(ctx)
	if err != nil {
		return nil
	}
	per := map[uint64]int{}
	for _, r := range rs.GetRanges() {
		if id := r.GetLeaderNodeId(); id != 0 {
			per[id]++
		}
	}
	return per
}

// scaleProfile writes a 10-second CPU profile of every node, taken 15
// seconds into the load, to dir/<run>-node<id>.pprof (SHALE_SCALE_PPROF).
func scaleProfile(b *testing.B, c *testCluster, dir, run string) {
	time.Sleep(15 * time.Second)
	var wg sync.WaitGroup
	for _, cn := range c.all() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get("http://" + cn.httpAddr + "/debug/pprof/profile?seconds=10")
			if err != nil {
				b.Logf("profile of node %d: %v", cn.id, err)
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err == nil {
				name := filepath.Join(dir, fmt.Sprintf("%s-node%d.pprof", strings.ReplaceAll(run, "/", "-"), cn.id))
				err = os.WriteFile(name, body, 0o644)
			}
			if err != nil {
				b.Logf("profile of node %d: %v", cn.id, err)
			}
		}()
	}
	wg.Wait()
}

func rangeCountTB(cl *client.Client) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rs, err := cl.Ranges(ctx)
	if err != nil {
		return -1
	}
	return len(rs.GetRanges())
}

// cpuSeconds is the CPU time (user + system) the cluster's running node
// processes have used, from /proc; 0 where /proc is unreadable.
func (c *testCluster) cpuSeconds() float64 {
	// Linux reports these times in USER_HZ ticks, 100 a second on every
	// architecture Go supports.
	const ticksPerSecond = 100
	var total float64
	for _, n := range c.all() {
		pid := n.proc.Pid()
		if pid == 0 {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces) start at
		// the state, field 3; utime and stime are fields 14 and 15.
		rest := string(raw[strings.LastIndexByte(string(raw), ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		total += (u + st) / ticksPerSecond
	}
	return total
}
