package raft

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
)

// TestMVCCStatsProperty: after random writes (puts, deletes, range
// deletes, batches), GC chunks at rising thresholds, splits and merges,
// the MVCC stats every replica of every range keeps in its replicated
// state equal mvcc.ComputeStats over the range's data in that node's
// engine, and every replica of a range has the same stats and GC
// threshold.
func TestMVCCStatsProperty(t *testing.T) {
	c := newMergeCluster(t, 3, nil)
	ctx := ctxT(t, 120*time.Second)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	key := func() []byte { return []byte(fmt.Sprintf("k%02d", rng.IntN(40))) }
	c.leader(keys.MetaRangeID)

	// propose sends cmd to the range holding k (following splits and
	// merges), retrying routing errors.
	propose := func(k []byte, mk func() *command.Command) (uint64, command.Result) {
		for {
			id := rangeOf(t, c, k)
			res, _, err := c.leader(id).store.Propose(ctx, id, mk())
			if err == nil && res.Code == command.CodeKeyOutOfRange {
				continue // split or merged meanwhile
			}
			if err == nil {
				if res.Code != command.CodeOK {
					t.Fatalf("%v rejected: %v", mk().Kind, res.Err())
				}
				return id, res
			}
			if errors.Is(err, ErrNotLeader) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRangeNotFound) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			t.Fatal(err)
		}
	}
	put := func(k []byte) func() *command.Command {
		v := bytes.Repeat([]byte{'v'}, rng.IntN(50))
		return func() *command.Command {
			return &command.Command{Kind: command.KindPut, Mutations: []command.Mutation{{Kind: command.KindPut, Key: k, Value: v}}}
		}
	}
	var collected, splits, merges int
	for step := 0; step < 400; step++ {
		switch p := rng.IntN(100); {
		case p < 50:
			k := key()
			propose(k, put(k))
		case p < 65:
			k := key()
			propose(k, func() *command.Command {
				return &command.Command{Kind: command.KindDelete, Mutations: []command.Mutation{{Kind: command.KindDelete, Key: k}}}
			})
		case p < 72:
			// A range delete within the range holding its start.
			k := key()
			id := rangeOf(t, c, k)
			end := []byte(fmt.Sprintf("%s5", k))
			if d := c.leader(id).store.mustReplica(id).Descriptor(); len(d.GetEndKey()) > 0 && bytes.Compare(end, d.GetEndKey()) > 0 {
				end = d.GetEndKey()
			}
			propose(k, func() *command.Command {
				return &command.Command{Kind: command.KindDeleteRange, Mutations: []command.Mutation{{Kind: command.KindDeleteRange, Key: k, Value: end}}}
			})
		case p < 78:
			// Two writes of one key in one command.
			k := key()
			propose(k, func() *command.Command {
				return &command.Command{Kind: command.KindBatch, Mutations: []command.Mutation{
					{Kind: command.KindPut, Key: k, Value: []byte("a")}, {Kind: command.KindPut, Key: k, Value: []byte("bb")}}}
			})
		case p < 90:
			// GC of one range at a threshold between its current one and
			// its frontier, in small chunks.
			k := key()
			id := rangeOf(t, c, k)
			st := mvccStateOf(t, c.leader(id).store, id)
			th := randomBetween(rng, st.GCThreshold, st.Frontier)
			if th.IsZero() {
				break
			}
			var start []byte
			for {
				res, _, err := c.leader(id).store.Propose(ctx, id, &command.Command{Kind: command.KindGC,
					GC: command.GC{Threshold: th, Start: start, MaxDeletes: uint64(rng.IntN(4)), MaxKeys: uint64(rng.IntN(5))}})
				if err == nil && res.Code == command.CodeOK {
					collected += int(res.NodeID)
				}
				if err != nil || res.Code != command.CodeOK || !res.Found {
					break // the range moved on: the next GC step does the rest
				}
				start = append([]byte{}, res.Value...)
			}
		case p < 95:
			k := key()
			id := rangeOf(t, c, k)
			_, _, err := c.leader(id).store.Split(ctx, id, k)
			if err != nil && !errors.Is(err, ErrSplitKey) && !errors.Is(err, ErrNotLeader) {
				t.Fatalf("split at %q: %v", k, err)
			}
			if err == nil {
				splits++
			}
		default:
			id := rangeOf(t, c, key())
			if _, err := mergeOnLeader(ctx, c, id); err == nil {
				merges++
			} else if !errors.Is(err, ErrMergeInvalid) && !errors.Is(err, ErrUnavailable) {
				t.Logf("merge of range %d: %v", id, err)
			}
		}
		if step%100 == 99 {
			checkStats(t, c)
		}
	}
	// A last GC of every range at its frontier, so that every run collects
	// what history it made.
	for _, s := range c.running() {
		for _, r := range s.Replicas() {
			d := r.Descriptor()
			if d == nil || keys.IsMetaRange(d) || !r.IsLeader() {
				continue
			}
			th := mvccStateOf(t, s, d.GetRangeId()).Frontier
			for start := []byte(nil); !th.IsZero(); {
				res, _, err := s.Propose(ctx, d.GetRangeId(), &command.Command{Kind: command.KindGC,
					GC: command.GC{Threshold: th, Start: start, MaxDeletes: 7, MaxKeys: 5}})
				if err != nil || res.Code != command.CodeOK {
					break
				}
				collected += int(res.NodeID)
				if !res.Found {
					break
				}
				start = append([]byte{}, res.Value...)
			}
		}
	}
	checkStats(t, c)
	t.Logf("%d versions collected, %d splits, %d merges", collected, splits, merges)
	if collected == 0 || splits == 0 {
		t.Fatalf("the run collected %d versions and split %d times: it tested nothing", collected, splits)
	}
}

// randomBetween returns a timestamp in [lo, hi] (lo if hi is below it).
// Timestamps of commands proposed without one differ in their logical
// part only, so both parts are drawn.
func randomBetween(rng *rand.Rand, lo, hi hlc.Timestamp) hlc.Timestamp {
	if !lo.Less(hi) {
		return lo
	}
	if lo.WallTime == hi.WallTime {
		return hlc.Timestamp{WallTime: lo.WallTime, Logical: lo.Logical + rng.Int32N(hi.Logical-lo.Logical+1)}
	}
	w := lo.WallTime + rng.Int64N(hi.WallTime-lo.WallTime+1)
	switch w {
	case hi.WallTime:
		return hlc.Timestamp{WallTime: w, Logical: rng.Int32N(hi.Logical + 1)}
	case lo.WallTime:
		return lo
	}
	return hlc.Timestamp{WallTime: w}
}

// rangeOf returns the user range holding k, as a leader of it sees it.
func rangeOf(t *testing.T, c *testCluster, k []byte) uint64 {
	t.Helper()
	var found uint64
	waitFor(t, 10*time.Second, fmt.Sprintf("the range of %q", k), func() bool {
		for _, s := range c.running() {
			for _, r := range s.Replicas() {
				d := r.Descriptor()
				if d != nil && !keys.IsMetaRange(d) && r.IsLeader() && keys.ContainsUserKey(d, k) {
					found = d.GetRangeId()
					return true
				}
			}
		}
		return false
	})
	return found
}

func mvccStateOf(t *testing.T, s *Store, id uint64) rangesm.MVCCState {
	t.Helper()
	r, err := s.Replica(id)
	if err != nil {
		t.Fatal(err)
	}
	return r.StateMachine().(*rangesm.Range).MVCCState()
}

// checkStats waits until every replica of every range has applied as far
// as the others, then compares each one's stats with its data.
func checkStats(t *testing.T, c *testCluster) {
	t.Helper()
	type rep struct {
		node uint64
		st   rangesm.MVCCState
		desc *kvpb.RangeDescriptor
	}
	var got map[uint64][]rep
	waitFor(t, 20*time.Second, "every replica at the same applied index", func() bool {
		got = map[uint64][]rep{}
		applied := map[uint64]uint64{}
		for id, s := range c.running() {
			for _, r := range s.Replicas() {
				d := r.Descriptor()
				if d == nil || keys.IsMetaRange(d) {
					continue
				}
				rid := d.GetRangeId()
				if a, ok := applied[rid]; ok && a != r.AppliedIndex() {
					return false
				}
				applied[rid] = r.AppliedIndex()
				got[rid] = append(got[rid], rep{node: id, st: r.StateMachine().(*rangesm.Range).MVCCState(), desc: d})
			}
		}
		for _, reps := range got {
			if len(reps) != len(c.running()) {
				return false
			}
		}
		return true
	})
	ids := make([]uint64, 0, len(got))
	for id := range got {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		for _, r := range got[id] {
			c.mu.Lock()
			db := c.nodes[r.node].db
			c.mu.Unlock()
			var end []byte
			if len(r.desc.GetEndKey()) > 0 {
				end = r.desc.GetEndKey()
			}
			want, err := keys.UserKeyspace.ComputeStats(db, r.desc.GetStartKey(), end)
			if err != nil {
				t.Fatal(err)
			}
			if r.st.Stats != want {
				t.Fatalf("node %d, range %d [%q, %q): stats %+v, data holds %+v", r.node, id, r.desc.GetStartKey(), end, r.st.Stats, want)
			}
			if first := got[id][0].st; r.st.GCThreshold != first.GCThreshold {
				t.Fatalf("range %d: node %d's GC threshold %s, node %d's %s", id, r.node, r.st.GCThreshold, got[id][0].node, first.GCThreshold)
			}
		}
	}
}
