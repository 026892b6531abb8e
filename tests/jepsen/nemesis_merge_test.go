package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// The merge-kill nemesis (docs/testing.md): a storm of merges (and some
// splits, so there is always something to merge) at random points of the
// workloads' keys, during which one node is SIGKILLed while a merge is in
// flight; it is restarted at the heal. It checks that a merge interrupted
// at any step (before the freeze, between the freeze and the merge,
// after the merge committed on some nodes only) loses and duplicates
// nothing and leaves no range frozen.

// mergeKillFault stops the storm, then restarts the node it killed.
type mergeKillFault struct {
	storm *storm
	// merged and split count the merges and splits that succeeded.
	merged, split *atomic.Int64
	victim        *node
	wg            *sync.WaitGroup
	killed        *bool
}

func (f mergeKillFault) heal(r *run) error {
	if err := f.storm.heal(r); err != nil {
		return err
	}
	r.logf("  merge-kill: %d merges and %d splits succeeded", f.merged.Load(), f.split.Load())
	f.wg.Wait() // the kill, if it started, is done
	if !*f.killed {
		return nil
	}
	return procFault{killed: []*node{f.victim}}.heal(r)
}

func mergeKill(r *run, rng *rand.Rand) (fault, string, error) {
	all := metaHolders(r)
	victim := all[rng.IntN(len(all))]
	f := mergeKillFault{victim: victim, wg: &sync.WaitGroup{}, killed: new(bool), merged: new(atomic.Int64), split: new(atomic.Int64)}
	var once sync.Once
	// The kill comes with one of the first merges, after a random delay
	// that lands it anywhere in the merge's steps.
	killAfter := 2 + rng.IntN(4)
	merges := 0
	var splits [][]byte // split points made by this storm, not merged yet
	f.storm = startStorm(300*time.Millisecond, rng, func(ctx context.Context, rng *rand.Rand) error {
		nodes := r.c.nodes(false)
		nd := nodes[rng.IntN(len(nodes))]
		if nd == victim {
			nd = nodes[(rng.IntN(len(nodes)-1)+indexOf(nodes, victim)+1)%len(nodes)]
		}
		admin, done, err := nd.admin()
		if err != nil {
			return err
		}
		defer done()
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		// Split, or merge a range back into its left-hand neighbour: the
		// key just before a split point is in the range ending there.
		if len(splits) < 2 || rng.IntN(4) == 0 {
			k := splitKey(rng)
			_, err = admin.Split(actx, &kvpb.SplitRequest{SplitKey: k})
			if err == nil {
				f.split.Add(1)
				splits = append(splits, k)
			}
			return err
		}
		i := rng.IntN(len(splits))
		at := splits[i]
		merges++
		if merges == killAfter {
			delay := time.Duration(rng.IntN(150)) * time.Millisecond
			once.Do(func() {
				f.wg.Add(1)
				go func() {
					defer f.wg.Done()
					time.Sleep(delay)
					victim.kill()
					*f.killed = true
				}()
			})
		}
		_, err = admin.Merge(actx, &kvpb.MergeRequest{Key: at[:len(at)-1]})
		if err == nil {
			f.merged.Add(1)
			splits = append(splits[:i], splits[i+1:]...)
		}
		return err
	})
	return f, fmt.Sprintf("merges (and splits) every ~300ms, SIGKILL n%d during merge #%d", victim.id, killAfter), nil
}

// metaHolders returns the nodes holding a replica of meta (all of them if
// that cannot be read). The victim is one of them: a node restarted
// without its start flags finds its peers only through its copy of meta
// (a gap of node restarts reported separately, not a merge's).
func metaHolders(r *run) []*node {
	all := r.c.nodes(false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rs, err := r.admin().Ranges(ctx)
	if err != nil {
		return all
	}
	var out []*node
	for _, rg := range rs.GetRanges() {
		if d := rg.GetRangeDescriptor(); d.GetRangeId() == 1 {
			for _, nd := range all {
				for _, rd := range d.GetReplicas() {
					if rd.GetNodeId() == nd.id {
						out = append(out, nd)
					}
				}
			}
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}

func indexOf(nodes []*node, nd *node) int {
	for i, x := range nodes {
		if x == nd {
			return i
		}
	}
	return 0
}
