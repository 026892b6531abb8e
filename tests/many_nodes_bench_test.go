package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// BenchmarkManyNodes runs SHALE_MANY_NODES node processes (default 30),
// each on its own 127.0.0.x address, holding SHALE_MANY_RANGES ranges
// (default 3,000) of three replicas, and measures the placement
// controller at that size:
//
//  1. spread: 3 nodes bootstrap, the key space is split into the ranges,
//     the other nodes join; the time until replicas and leaders are
//     balanced (max/min <= 1.1 each, every range with three voters; on
//     a small smoke run, where one range is 10%, max - min <= 2 does);
//  2. add: with a writer putting to random ranges throughout, 3 more
//     nodes join; the time until the balance holds again over all nodes;
//  3. remove: 3 of the first nodes are removed (Admin.RemoveNode, which
//     has placement replace their replicas before the node leaves); the
//     time until every range has its three voters again, none on them.
//
// No write of the writer may fail (an ambiguous outcome counts as a
// failure), and every acknowledged write is read back at the end. Each
// phase is bounded by SHALE_MANY_PHASE_MINUTES (default 30). Placement
// runs every second with SHALE_MANY_MOVES moves per pass (default 16).
//
//	make bench-many SHALE_MANY_NODES=30 SHALE_MANY_RANGES=3000
//
// docs/benchmarks.md, "Many nodes", records the results.
func BenchmarkManyNodes(b *testing.B) {
	nodes := envInt("SHALE_MANY_NODES", 30)
	ranges := envInt("SHALE_MANY_RANGES", 3000)
	moves := envInt("SHALE_MANY_MOVES", 16)
	phase := time.Duration(envInt("SHALE_MANY_PHASE_MINUTES", 30)) * time.Minute
	if nodes < 6 {
		b.Fatalf("SHALE_MANY_NODES=%d: at least 6 (3 of them are removed)", nodes)
	}
	for i := 0; i < b.N; i++ {
		manyNodesRun(b, nodes, ranges, moves, phase)
	}
}

func manyNodesRun(b *testing.B, nodes, ranges, moves int, phase time.Duration) {
	c := newCluster(b, 3, "--raft-tick", "100ms",
		"--disable-placement=false", "--placement-interval", "1s",
		"--placement-max-moves", strconv.Itoa(moves),
		// The ranges are small and idle: they must not merge away.
		"--disable-auto-merge",
		// A node starved of CPU on a shared machine is not dead: only
		// a removal takes replicas away.
		"--dead-node-timeout", "5m")
	cl := c.client(1, 2, 3) // nodes 1-3 stay throughout
	key := func(i int) string { return fmt.Sprintf("many-%07d", i*10000000/ranges) }
	start := time.Now()
	splitAt(b, cl, ranges, key)
	b.Logf("split into %d ranges on 3 nodes in %v", ranges, time.Since(start).Round(time.Second))

	// 1. Spread over the nodes.
	start = time.Now()
	// One at a time: a joining node is given the next free ID, which
	// must be the harness's.
	join := func(from, to uint64) {
		for id := from; id <= to; id++ {
			c.newNode(id)
			c.start(id, "--join", c.node(1).grpcAddr)
		}
	}
	join(4, uint64(nodes))
	b.Logf("%d nodes joined in %v", nodes-3, time.Since(start).Round(time.Second))
	members := idRange(1, uint64(nodes))
	d := waitBalanced(b, cl, members, phase, "spread over the nodes")
	b.Logf("spread: balanced %v after the joins", d.Round(time.Second))
	b.ReportMetric(d.Seconds(), "spread-s")

	// 2. Three nodes join under writes.
	w := startSpreadWriter(cl, ranges, 8)
	start = time.Now()
	join(uint64(nodes)+1, uint64(nodes)+3)
	members = idRange(1, uint64(nodes)+3)
	d = time.Since(start) + waitBalanced(b, cl, members, phase, "balanced with 3 nodes added")
	b.Logf("add 3 nodes: balanced %v after the first join", d.Round(time.Second))
	b.ReportMetric(d.Seconds(), "add-s")

	// 3. Three nodes are removed under writes.
	removed := []uint64{4, 5, 6}
	start = time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(removed))
	for i, id := range removed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), phase)
			defer cancel()
			errs[i] = cl.RemoveNode(ctx, id, true)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("removing node %d: %v", removed[i], err)
		}
	}
	removeDur := time.Since(start)
	for _, id := range removed {
		c.node(id).kill()
	}
	members = slices.DeleteFunc(members, func(id uint64) bool { return slices.Contains(removed, id) })
	rest := waitBalanced(b, cl, members, phase, "re-replicated after the removals")
	b.Logf("remove 3 nodes: removed (every replica replaced) in %v, balanced %v later",
		removeDur.Round(time.Second), rest.Round(time.Second))
	b.ReportMetric(removeDur.Seconds(), "remove-s")

	acked, failed := w.stop()
	b.Logf("writer: %d writes acknowledged, %d failed (last: %v)", len(acked), len(failed), w.lastErr())
	if len(failed) > 0 {
		b.Errorf("%d writes failed while nodes were added and removed; first: %s", len(failed), failed[0])
	}
	checkAcked(b, cl, acked)
}

func idRange(lo, hi uint64) []uint64 {
	var out []uint64
	for id := lo; id <= hi; id++ {
		out = append(out, id)
	}
	return out
}

// waitBalanced waits until, per meta, every range has three voters and
// no other replica, all on members, and the replicas and leaders per
// member are balanced (max/min <= 1.1; see balanced); it returns how long that took and
// fails after timeout with the last state.
func waitBalanced(b testing.TB, cl *client.Client, members []uint64, timeout time.Duration, what string) time.Duration {
	b.Helper()
	start := time.Now()
	logged := start
	for {
		msg := balanceState(cl, members)
		if msg == "" {
			reps, leads, n := placementCounts(cl)
			b.Logf("%s: %d ranges; replicas per node %v (max/min %.2f), leaders %v (max/min %.2f)",
				what, n, reps, spread(reps, members), leads, spread(leads, members))
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			b.Fatalf("%s: not after %v: %s", what, timeout, msg)
		}
		if time.Since(logged) > 30*time.Second {
			b.Logf("%s, %v: %s", what, time.Since(start).Round(time.Second), msg)
			logged = time.Now()
		}
		time.Sleep(time.Second)
	}
}

// balanceState returns "" when the ranges are placed as waitBalanced
// wants, else what is not.
func balanceState(cl *client.Client, members []uint64) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rs, err := cl.Ranges(ctx)
	if err != nil {
		return err.Error()
	}
	reps, leads := map[uint64]int{}, map[uint64]int{}
	moving := 0
	for _, r := range rs.GetRanges() {
		d := r.GetRangeDescriptor()
		voters := 0
		ok := true
		for _, rd := range d.GetReplicas() {
			reps[rd.GetNodeId()]++
			if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_VOTER {
				voters++
			}
			ok = ok && rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_VOTER && containsID(members, rd.GetNodeId())
		}
		if !ok || voters != 3 {
			moving++
		}
		if id := r.GetLeaderNodeId(); id != 0 {
			leads[id]++
		}
	}
	if moving > 0 {
		return fmt.Sprintf("%d of %d ranges without three voters on the members; replicas per node %v", moving, len(rs.GetRanges()), reps)
	}
	if !balanced(reps, members) {
		return fmt.Sprintf("replicas per node %v (max/min %.2f)", reps, spread(reps, members))
	}
	if !balanced(leads, members) {
		return fmt.Sprintf("leaders per node %v (max/min %.2f)", leads, spread(leads, members))
	}
	return ""
}

// balanced: max/min <= 1.1 over members, or (for the small clusters a
// smoke run uses, where one range more is already 10%) max - min <= 2.
func balanced(per map[uint64]int, members []uint64) bool {
	lo, hi := 1<<30, 0
	for _, id := range members {
		lo, hi = min(lo, per[id]), max(hi, per[id])
	}
	return float64(hi) <= 1.1*float64(lo) || hi-lo <= 2
}

// placementCounts returns the replicas and leaders per node and the
// number of ranges, per meta.
func placementCounts(cl *client.Client) (reps, leads map[uint64]int, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rs, err := cl.Ranges(ctx)
	if err != nil {
		return nil, nil, 0
	}
	reps, leads = map[uint64]int{}, map[uint64]int{}
	for _, r := range rs.GetRanges() {
		for _, rd := range r.GetRangeDescriptor().GetReplicas() {
			reps[rd.GetNodeId()]++
		}
		if id := r.GetLeaderNodeId(); id != 0 {
			leads[id]++
		}
	}
	return reps, leads, len(rs.GetRanges())
}

// spread is max/min of per over members (+Inf when a member has none).
func spread(per map[uint64]int, members []uint64) float64 {
	lo, hi := 1<<30, 0
	for _, id := range members {
		lo, hi = min(lo, per[id]), max(hi, per[id])
	}
	return float64(hi) / float64(lo)
}

// spreadWriter puts to random keys over the whole split key space, so
// that every range is written while replicas move.
type spreadWriter struct {
	wg     sync.WaitGroup
	done   atomic.Bool
	mu     sync.Mutex
	acked  map[string]string
	failed []string
	last   error
}

func startSpreadWriter(cl *client.Client, ranges, workers int) *spreadWriter {
	w := &spreadWriter{acked: map[string]string{}}
	var seq atomic.Int64
	for i := 0; i < workers; i++ {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for !w.done.Load() {
				n := seq.Add(1)
				k := fmt.Sprintf("many-%07d-%d", rng.IntN(10000000), n)
				v := fmt.Sprintf("v%d", n)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := cl.Put(ctx, []byte(k), []byte(v))
				cancel()
				w.mu.Lock()
				if err == nil {
					w.acked[k] = v
				} else {
					what := "failed"
					if errors.Is(err, client.ErrAmbiguous) {
						what = "ambiguous"
					}
					w.failed = append(w.failed, fmt.Sprintf("put %s %s: %v", k, what, err))
					w.last = err
				}
				w.mu.Unlock()
			}
		}()
	}
	return w
}

// stop stops the writer and returns the acknowledged writes and the
// failed ones.
func (w *spreadWriter) stop() (map[string]string, []string) {
	w.done.Store(true)
	w.wg.Wait()
	return w.acked, w.failed
}

func (w *spreadWriter) lastErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}
