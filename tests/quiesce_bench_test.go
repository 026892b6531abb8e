package tests

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// BenchmarkIdleRanges measures what ranges nobody uses cost: a 3-node
// cluster (production tick, 100 ms) is split into SHALE_IDLE_RANGES
// ranges (default 1000), every one replicated on every node, and left
// idle. It reports each node's CPU (from /proc, as a share of one core,
// over SHALE_IDLE_SECONDS, default 20) and resident memory, the memory
// added per idle replica (RSS and Go heap before and after the splits,
// divided by the ranges added), and the latency of single puts to cold
// ranges (each its range's first request since it went idle), each
// followed by a put to one warm range: the cold p99 should stay within 2x
// the warm one. CPU is also measured with two ranges, before the splits.
// SHALE_IDLE_RUNS picks the runs (default "quiescent,awake": the second
// with --disable-quiescence, every range ticking and heartbeating).
//
//	make bench-idle SHALE_IDLE_RANGES=10000
//
// docs/benchmarks.md, "Idle ranges", records the results.
func BenchmarkIdleRanges(b *testing.B) {
	ranges := envInt("SHALE_IDLE_RANGES", 1000)
	seconds := envInt("SHALE_IDLE_SECONDS", 20)
	runs := os.Getenv("SHALE_IDLE_RUNS")
	if runs == "" {
		runs = "quiescent,awake"
	}
	for i := 0; i < b.N; i++ {
		for _, run := range strings.Split(runs, ",") {
			var flags []string
			switch run {
			case "quiescent":
			case "awake":
				flags = append(flags, "--disable-quiescence")
			default:
				b.Fatalf("SHALE_IDLE_RUNS: unknown run %q (quiescent, awake)", run)
			}
			b.Run(run, func(b *testing.B) { idleRun(b, ranges, time.Duration(seconds)*time.Second, flags) })
		}
	}
}

func idleRun(b *testing.B, ranges int, window time.Duration, flags []string) {
	c := newCluster(b, 3, append([]string{"--raft-tick", "100ms"}, flags...)...)
	cl := c.client()
	// Settle, then the baseline: two ranges (meta and the user range).
	time.Sleep(3 * time.Second)
	cpuBase0 := c.cpuByNode()
	time.Sleep(window)
	cpuBase1 := c.cpuByNode()
	rss0, heap0 := c.memory()
	start := time.Now()
	splitInto(b, cl, ranges)
	b.Logf("split into %d ranges in %v", ranges, time.Since(start).Round(time.Second))

	// Wait for rest (or, awake, give the splits' aftermath as long).
	want := float64(ranges + 1)
	deadline := time.Now().Add(2 * time.Minute)
	quiescent := len(flags) == 0
	for quiescent && time.Now().Before(deadline) {
		done := true
		for _, n := range c.all() {
			if c.metric(n.id, "shale_raft_quiescent_replicas") < want {
				done = false
			}
		}
		if done {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !quiescent {
		time.Sleep(10 * time.Second)
	}
	cpu0 := c.cpuByNode()
	time.Sleep(window)
	cpu1 := c.cpuByNode()
	rss1, heap1 := c.memory()
	for _, n := range c.all() {
		id := n.id
		share := (cpu1[id] - cpu0[id]) / window.Seconds()
		base := (cpuBase1[id] - cpuBase0[id]) / window.Seconds()
		b.Logf("node %d: CPU %.1f%% of a core (%.1f%% with 2 ranges), RSS %.0f MiB, Go heap %.0f MiB, %v replicas at rest",
			id, 100*share, 100*base, rss1[id]/(1<<20), heap1[id]/(1<<20), c.metric(id, "shale_raft_quiescent_replicas"))
		b.ReportMetric(100*share, fmt.Sprintf("cpu%%-n%d", id))
		b.ReportMetric(rss1[id]/(1<<20), fmt.Sprintf("rss-MiB-n%d", id))
	}
	var perRSS, perHeap float64
	for _, n := range c.all() {
		perRSS += (rss1[n.id] - rss0[n.id]) / float64(ranges-1) / 3
		perHeap += (heap1[n.id] - heap0[n.id]) / float64(ranges-1) / 3
	}
	b.Logf("per idle replica: %.1f KiB of RSS, %.1f KiB of Go heap", perRSS/1024, perHeap/1024)
	b.ReportMetric(perRSS/1024, "rss-KiB/replica")
	b.ReportMetric(perHeap/1024, "heap-KiB/replica")

	// Cold puts: one to each of 200 idle ranges, one at a time; each
	// followed by a warm put, to one range written throughout, so that
	// both see the machine alike.
	warmKey := splitKey(ranges, ranges-1) + "-warm"
	for i := 0; i < 20; i++ {
		timedPut(b, cl, warmKey)
	}
	cold := make([]time.Duration, 0, 200)
	warm := make([]time.Duration, 0, 200)
	step := max(ranges/200, 1)
	for i := 0; i < 200 && i*step < ranges-1; i++ {
		cold = append(cold, timedPut(b, cl, splitKey(ranges, i*step)+"-cold"))
		warm = append(warm, timedPut(b, cl, warmKey))
	}
	cp50, cp99 := percentiles(cold)
	wp50, wp99 := percentiles(warm)
	b.Logf("puts: cold p50 %v p99 %v, warm p50 %v p99 %v: cold p99 = %.2fx warm p99",
		cp50, cp99, wp50, wp99, float64(cp99)/float64(wp99))
	b.ReportMetric(float64(cp99.Microseconds()), "cold-p99-us")
	b.ReportMetric(float64(wp99.Microseconds()), "warm-p99-us")
}

// splitKey is the key range i (of n) starts at.
func splitKey(n, i int) string { return fmt.Sprintf("idle-%06d", i*1000000/n) }

// splitInto splits the user key space into n ranges at splitKey(n, i),
// halving key intervals in parallel (each split of its own range).
func splitInto(b *testing.B, cl *client.Client, n int) {
	splitAt(b, cl, n, func(i int) string { return splitKey(n, i) })
}

// splitAt splits the user key space into n ranges at key(1) ...
// key(n-1) (increasing), halving key intervals in parallel (each split
// of its own range).
func splitAt(b testing.TB, cl *client.Client, n int, key func(i int) string) {
	if n < 2 {
		return
	}
	type span struct{ lo, hi int } // split at the middle of (lo, hi)
	work := make(chan span, 2*n+2)
	var pending sync.WaitGroup
	var failed atomic.Value
	split := func(i int) {
		// A split whose outcome was unknown is tried again: if it had
		// applied, the key is now a range's start, an invalid split key.
		var err error
		for try := 0; try < 10; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, _, err = cl.Split(ctx, []byte(key(i)))
			cancel()
			if err == nil || (try > 0 && strings.Contains(err.Error(), "invalid split key")) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		failed.Store(err)
	}
	split(1) // the user range starts at the empty key
	pending.Add(1)
	work <- span{1, n}
	var workers sync.WaitGroup
	for w := 0; w < 4; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for s := range work {
				if mid := (s.lo + s.hi) / 2; mid > s.lo {
					split(mid)
					pending.Add(2)
					work <- span{s.lo, mid}
					work <- span{mid, s.hi}
				}
				pending.Done()
			}
		}()
	}
	pending.Wait()
	close(work)
	workers.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("splitting: %v", err)
	}
}

// timedPut puts key once and returns how long it took.
func timedPut(b *testing.B, cl *client.Client, key string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := cl.Put(ctx, []byte(key), []byte("v")); err != nil {
		b.Fatalf("put %s: %v", key, err)
	}
	return time.Since(start)
}

// percentiles returns the median and the 99th percentile of ds.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}

// cpuByNode is each running node's CPU time (user + system) in seconds.
func (c *testCluster) cpuByNode() map[uint64]float64 {
	out := map[uint64]float64{}
	for _, n := range c.all() {
		if f := procStat(n.proc.Pid()); len(f) >= 13 {
			u, _ := strconv.ParseFloat(f[11], 64)
			s, _ := strconv.ParseFloat(f[12], 64)
			out[n.id] = (u + s) / 100 // USER_HZ
		}
	}
	return out
}

// memory returns each node's resident set (from /proc) and Go heap in
// use (from its metrics), in bytes.
func (c *testCluster) memory() (rss, heap map[uint64]float64) {
	rss, heap = map[uint64]float64{}, map[uint64]float64{}
	for _, n := range c.all() {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.proc.Pid()))
		if err == nil {
			for _, line := range strings.Split(string(raw), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
					kb, _ := strconv.ParseFloat(f[1], 64)
					rss[n.id] = kb * 1024
				}
			}
		}
		heap[n.id] = c.metric(n.id, "go_memstats_heap_inuse_bytes")
	}
	return rss, heap
}

// procStat returns the fields of /proc/<pid>/stat after the command
// name (the state is the first), or nil.
func procStat(pid int) []string {
	if pid == 0 {
		return nil
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(raw)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
}
