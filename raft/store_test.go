package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestReplicationToAll: writes through the leader reach every replica, on
// both bootstrapped ranges.
func TestReplicationToAll(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 30*time.Second)
	var last uint64
	for i := 0; i < 200; i++ {
		idx, err := c.put(ctx, keys.FirstUserRangeID, fmt.Sprintf("k%03d", i), fmt.Sprint("v", i))
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		last = idx
	}
	c.waitApplied(keys.FirstUserRangeID, last)
	for id := uint64(1); id <= 3; id++ {
		for i := 0; i < 200; i++ {
			if v, ok := c.get(id, fmt.Sprintf("k%03d", i)); !ok || v != fmt.Sprint("v", i) {
				t.Fatalf("node %d: k%03d = %q, %v", id, i, v, ok)
			}
		}
	}
	// The meta range has a leader too, and knows the nodes and ranges.
	l := c.leader(keys.MetaRangeID)
	nodes, err := l.store.MetaNodes()
	if err != nil || len(nodes) != 3 {
		t.Fatalf("MetaNodes = %v, %v", nodes, err)
	}
	ds, err := l.store.MetaLookup([]byte("anything"), 0)
	if err != nil || len(ds) != 1 || ds[0].GetRangeId() != keys.FirstUserRangeID {
		t.Fatalf("MetaLookup = %v, %v", ds, err)
	}
}

// TestGroupCommitAcrossRanges: concurrent writes to both ranges share
// rounds, and so log syncs: far fewer syncs than writes.
func TestGroupCommitAcrossRanges(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 30*time.Second)
	c.leader(keys.FirstUserRangeID)
	c.leader(keys.MetaRangeID)
	var wg sync.WaitGroup
	var failed atomic.Int64
	const writers, each = 16, 25
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := c.put(ctx, keys.FirstUserRangeID, fmt.Sprintf("w%d-%d", w, i), "x"); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d writes failed", failed.Load())
	}
	var syncs float64
	for _, s := range c.running() {
		syncs += counterValue(s.metrics.logSyncs)
	}
	t.Logf("%d writes, %v log syncs across 3 nodes", writers*each, syncs)
	if syncs >= 3*writers*each {
		t.Fatalf("%v syncs for %d writes on 3 nodes: no group commit", syncs, writers*each)
	}
}

// TestLeaderFailover: the leader stops abruptly; a new one is elected
// within a few election timeouts and no acknowledged write is lost.
func TestLeaderFailover(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	acked := map[string]bool{}
	for i := 0; i < 50; i++ {
		k := fmt.Sprint("before-", i)
		if _, err := c.put(ctx, keys.FirstUserRangeID, k, "v"); err != nil {
			t.Fatal(err)
		}
		acked[k] = true
	}
	old := c.leader(keys.FirstUserRangeID)
	c.stop(old.id)
	start := time.Now()
	nl := c.leader(keys.FirstUserRangeID)
	took := time.Since(start)
	t.Logf("new leader n%d after %v", nl.id, took)
	if limit := 10 * 10 * testTick; took > limit {
		t.Errorf("electing a new leader took %v, more than %v (5 maximal election timeouts)", took, limit)
	}
	for i := 0; i < 50; i++ {
		k := fmt.Sprint("after-", i)
		if _, err := c.put(ctx, keys.FirstUserRangeID, k, "v"); err != nil {
			t.Fatal(err)
		}
		acked[k] = true
	}
	idx := mustStatus(t, nl, keys.FirstUserRangeID).Applied
	c.start(old.id)
	c.waitApplied(keys.FirstUserRangeID, idx)
	for _, id := range c.ids() {
		for k := range acked {
			if _, ok := c.get(id, k); !ok {
				t.Fatalf("node %d lost acknowledged write %q", id, k)
			}
		}
	}
}

func mustStatus(t *testing.T, n leaderNode, rangeID uint64) RaftStatus {
	t.Helper()
	r, err := n.store.Replica(rangeID)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status()
}

// TestCASIsLinearizable: concurrent compare-and-swap increments of one
// counter; every successful CAS must have read the value the previous one
// wrote, so the final value equals the number of successes. Evaluation
// happens at apply time, several entries to a batch: a CAS must see the
// writes of the entries applied before it in the same batch.
func TestCASIsLinearizable(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	l := c.leader(keys.FirstUserRangeID)
	var wg sync.WaitGroup
	var successes atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				cur, found := c.get(l.id, "counter")
				cmd := &command.Command{Kind: command.KindCAS, CAS: command.CAS{Key: []byte("counter"), ExpectAbsent: !found, Expected: []byte(cur)}}
				n, _ := strconv.Atoi(cur)
				cmd.CAS.NewValue = []byte(strconv.Itoa(n + 1))
				res, _, err := l.store.Propose(ctx, keys.FirstUserRangeID, cmd)
				if err != nil {
					t.Errorf("CAS: %v", err)
					return
				}
				if res.Succeeded {
					successes.Add(1)
				} else if res.Found && string(res.Value) == cur && found {
					t.Errorf("CAS failed although the value was %q as expected", cur)
				}
			}
		}()
	}
	wg.Wait()
	v, _ := c.get(l.id, "counter")
	if got := strconv.Itoa(int(successes.Load())); v != got {
		t.Fatalf("counter = %s after %s successful increments", v, got)
	}
	t.Logf("%d successful CAS increments", successes.Load())
}

// TestDedupReturnsFirstResult: a retry of (client, seq) returns the first
// attempt's result and is not applied again.
func TestDedupReturnsFirstResult(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 30*time.Second)
	l := c.leader(keys.FirstUserRangeID)
	cas := func() command.Result {
		cmd := &command.Command{Kind: command.KindCAS, CAS: command.CAS{Key: []byte("once"), ExpectAbsent: true, NewValue: []byte("1")}}
		cmd.ClientID, cmd.RequestSeq = 77, 5
		res, _, err := l.store.Propose(ctx, keys.FirstUserRangeID, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := cas()
	if !first.Succeeded {
		t.Fatalf("first attempt: %+v", first)
	}
	// Change the key behind the retry's back: a second application would
	// fail the CAS (the key now exists).
	if _, err := c.put(ctx, keys.FirstUserRangeID, "once", "2"); err != nil {
		t.Fatal(err)
	}
	retry := cas()
	if !retry.Succeeded {
		t.Fatalf("retry was applied again instead of answered from the dedup record: %+v", retry)
	}
	if v, _ := c.get(l.id, "once"); v != "2" {
		t.Fatalf("retry changed the key: %q", v)
	}
	if hits := counterValue(l.store.metrics.dedupHits); hits < 1 {
		t.Fatalf("dedup hits = %v", hits)
	}

	// A DedupGC with a cutoff after the record collects it; a retry is then
	// below its client's floor and refused, not applied.
	gc := &command.Command{Kind: command.KindDedupGC}
	gc.ProposerTime = time.Now().Add(time.Hour).UnixNano()
	r, _ := l.store.Replica(keys.FirstUserRangeID)
	if _, _, err := proposeRaw(ctx, r, gc); err != nil {
		t.Fatal(err)
	}
	res := cas()
	if res.Code != command.CodeDedupWindowExpired {
		t.Fatalf("retry after GC: %+v", res)
	}
}

// proposeRaw proposes cmd keeping its ProposerTime (for GC commands).
func proposeRaw(ctx context.Context, r *Replica, cmd *command.Command) (command.Result, uint64, error) {
	cmd.ProposerNode = r.store.cfg.NodeID
	cmd.ProposalID = r.store.nextProposalID()
	data, err := cmd.Encode(nil)
	if err != nil {
		return command.Result{}, 0, err
	}
	p := &proposal{id: cmd.ProposalID, data: data, ctx: ctx, done: make(chan proposalResult, 1)}
	return r.submit(p)
}

// TestKeysOutsideTheRangeAreRejected: a write to the meta range's user
// span is rejected deterministically and changes nothing.
func TestKeysOutsideTheRangeAreRejected(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 30*time.Second)
	_, err := c.put(ctx, keys.MetaRangeID, "user-key", "v")
	if command.RejectionCode(err) != command.CodeKeyOutOfRange {
		t.Fatalf("put to the meta range: %v", err)
	}
	if _, ok := c.get(c.leader(keys.MetaRangeID).id, "user-key"); ok {
		t.Fatal("a rejected write was applied")
	}
}

// TestReadsAndLease: linearizable reads see every acknowledged write; after
// a few reads the leader holds a lease; a transfer drops it at once and
// the new leader serves reads.
func TestReadsAndLease(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 30*time.Second)
	for i := 0; i < 20; i++ {
		idx, err := c.put(ctx, keys.FirstUserRangeID, "r", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		l := c.leader(keys.FirstUserRangeID)
		r, _ := l.store.Replica(keys.FirstUserRangeID)
		at, err := r.ReadBarrier(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if at < idx {
			t.Fatalf("read barrier at %d, before the acknowledged write at %d", at, idx)
		}
		if v, _ := c.get(l.id, "r"); v != fmt.Sprint(i) {
			t.Fatalf("read %q after writing %d", v, i)
		}
	}
	l := c.leader(keys.FirstUserRangeID)
	r, _ := l.store.Replica(keys.FirstUserRangeID)
	waitFor(t, 5*time.Second, "a lease", func() bool {
		if _, err := r.ReadBarrier(ctx); err != nil {
			t.Fatal(err)
		}
		return r.Status().LeaseValid
	})
	// Followers refuse linearizable reads with a leader hint.
	for id, s := range c.running() {
		if id == l.id {
			continue
		}
		fr, _ := s.Replica(keys.FirstUserRangeID)
		waitFor(t, 5*time.Second, "the follower to know the leader", func() bool { return fr.Status().Leader != 0 })
		_, err := fr.ReadBarrier(ctx)
		var nle *NotLeaderError
		if !errors.As(err, &nle) || nle.LeaderNodeID != l.id {
			t.Fatalf("follower read barrier: %v", err)
		}
	}
	var target uint64
	for _, id := range c.ids() {
		if id != l.id {
			target = id
			break
		}
	}
	if err := l.store.TransferLeader(ctx, keys.FirstUserRangeID, target); err != nil {
		t.Fatal(err)
	}
	if r.Status().LeaseValid {
		t.Fatal("the old leader still holds a lease after the transfer")
	}
	nl := c.leader(keys.FirstUserRangeID)
	if nl.id != target {
		t.Fatalf("leader is n%d, transferred to n%d", nl.id, target)
	}
	nr, _ := nl.store.Replica(keys.FirstUserRangeID)
	if _, err := nr.ReadBarrier(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestProposeOnFollowerIsNotLeader: a follower refuses a write with a
// definite NotLeader naming the leader's node.
func TestProposeOnFollowerIsNotLeader(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 30*time.Second)
	l := c.leader(keys.FirstUserRangeID)
	for id, s := range c.running() {
		if id == l.id {
			continue
		}
		waitFor(t, 5*time.Second, "the follower to know the leader", func() bool {
			return mustStatus(t, leaderNode{id, s}, keys.FirstUserRangeID).Leader != 0
		})
		cmd := &command.Command{Kind: command.KindPut, Mutations: []command.Mutation{{Kind: command.KindPut, Key: []byte("k"), Value: []byte("v")}}}
		_, _, err := s.Propose(ctx, keys.FirstUserRangeID, cmd)
		var nle *NotLeaderError
		if !errors.As(err, &nle) || nle.LeaderNodeID != l.id || errors.Is(err, ErrAmbiguous) {
			t.Fatalf("propose on follower n%d: %v", id, err)
		}
	}
}

// TestRestartEveryNode: all nodes stop and start again; the data is there
// and the cluster serves writes.
func TestRestartEveryNode(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	for i := 0; i < 30; i++ {
		if _, err := c.put(ctx, keys.FirstUserRangeID, fmt.Sprint("k", i), "v1"); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range c.ids() {
		c.stop(id)
	}
	for _, id := range c.ids() {
		c.start(id)
	}
	idx, err := c.put(ctx, keys.FirstUserRangeID, "after-restart", "v2")
	if err != nil {
		t.Fatal(err)
	}
	c.waitApplied(keys.FirstUserRangeID, idx)
	for _, id := range c.ids() {
		for i := 0; i < 30; i++ {
			if v, ok := c.get(id, fmt.Sprint("k", i)); !ok || v != "v1" {
				t.Fatalf("node %d: k%d = %q %v after restart", id, i, v, ok)
			}
		}
	}
}

// TestSnapshotAfterTruncation: a node down while the log moves on and is
// truncated past it catches up by snapshot.
func TestSnapshotAfterTruncation(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.LogTruncateMinEntries = 20
		cfg.LogMaxEntries = 100
	})
	ctx := ctxT(t, 90*time.Second)
	l := c.leader(keys.FirstUserRangeID)
	var down uint64
	for _, id := range c.ids() {
		if id != l.id {
			down = id
			break
		}
	}
	c.stop(down)
	var last uint64
	for i := 0; i < 600; i++ {
		idx, err := c.put(ctx, keys.FirstUserRangeID, fmt.Sprintf("k%04d", i), fmt.Sprint("v", i))
		if err != nil {
			t.Fatal(err)
		}
		last = idx
	}
	l = c.leader(keys.FirstUserRangeID)
	st := mustStatus(t, l, keys.FirstUserRangeID)
	if st.Truncated < 300 {
		t.Fatalf("leader's log truncated only to %d after %d writes", st.Truncated, last)
	}
	c.start(down)
	c.waitApplied(keys.FirstUserRangeID, last)
	if got := counterValue(c.storeOf(down).metrics.snapshotsReceived); got < 1 {
		t.Fatalf("node %d caught up without a snapshot (%v received)", down, got)
	}
	for i := 0; i < 600; i++ {
		if v, ok := c.get(down, fmt.Sprintf("k%04d", i)); !ok || v != fmt.Sprint("v", i) {
			t.Fatalf("node %d after snapshot: k%04d = %q %v", down, i, v, ok)
		}
	}
	// And it keeps replicating normally afterwards.
	idx, err := c.put(ctx, keys.FirstUserRangeID, "post-snapshot", "x")
	if err != nil {
		t.Fatal(err)
	}
	c.waitApplied(keys.FirstUserRangeID, idx)
	if _, ok := c.get(down, "post-snapshot"); !ok {
		t.Fatal("no replication after the snapshot")
	}
}

// TestAddAndRemoveNodes: a new node joins both ranges as a learner, catches
// up by snapshot and becomes a voter; an old node is removed and its
// replica destroyed. Then two voters are replaced at once (joint
// consensus). Writes continue throughout.
func TestAddAndRemoveNodes(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 120*time.Second)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes, writeErrs atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.put(wctx, keys.FirstUserRangeID, fmt.Sprintf("load%05d", i), "v")
			cancel()
			if err != nil {
				writeErrs.Add(1)
			} else {
				writes.Add(1)
			}
		}
	}()
	c.addJoiningNode(4)
	for _, rangeID := range []uint64{keys.MetaRangeID, keys.FirstUserRangeID} {
		l := c.leader(rangeID)
		d, err := l.store.ChangeReplicas(ctx, rangeID, []*kvpb.ReplicaChange{{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: 4}})
		if err != nil {
			t.Fatalf("adding node 4 to range %d: %v", rangeID, err)
		}
		if rd := apply.ReplicaOnNode(d, 4); rd == nil || rd.GetType() != kvpb.ReplicaType_REPLICA_TYPE_VOTER {
			t.Fatalf("range %d: node 4 is %v", rangeID, rd)
		}
	}
	if got := counterValue(c.storeOf(4).metrics.snapshotsReceived); got < 2 {
		t.Fatalf("node 4 received %v snapshots, want one per range", got)
	}
	// Remove node 1 from both ranges.
	for _, rangeID := range []uint64{keys.MetaRangeID, keys.FirstUserRangeID} {
		l := c.leader(rangeID)
		if _, err := l.store.ChangeReplicas(ctx, rangeID, []*kvpb.ReplicaChange{{Kind: kvpb.ReplicaChange_REMOVE, NodeId: 1}}); err != nil {
			if !errors.Is(err, ErrAmbiguous) {
				t.Fatalf("removing node 1 from range %d: %v", rangeID, err)
			}
		}
		waitFor(t, 10*time.Second, "node 1's replica to be destroyed", func() bool {
			_, err := c.storeOf(1).Replica(rangeID)
			return errors.Is(err, ErrRangeNotFound)
		})
		if left := raftStateKeys(t, c.node(1).db, rangeID); len(left) > 0 {
			t.Fatalf("node 1 still holds %d Raft state keys of destroyed range %d, first %x", len(left), rangeID, left[0])
		}
	}
	// Replace two voters at once: joint consensus.
	c.addJoiningNode(5)
	c.addJoiningNode(6)
	l := c.leader(keys.FirstUserRangeID)
	d, err := l.store.ChangeReplicas(ctx, keys.FirstUserRangeID, []*kvpb.ReplicaChange{
		{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: 5}, {Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: 6},
		{Kind: kvpb.ReplicaChange_REMOVE, NodeId: 2}, {Kind: kvpb.ReplicaChange_REMOVE, NodeId: 3},
	})
	if err != nil && !errors.Is(err, ErrAmbiguous) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("joint change: %v", err)
	}
	waitFor(t, 20*time.Second, "the joint change to complete", func() bool {
		d = c.leader(keys.FirstUserRangeID).store.mustReplica(keys.FirstUserRangeID).Descriptor()
		return !apply.IsJoint(d) && len(d.GetReplicas()) == 3
	})
	for _, n := range []uint64{4, 5, 6} {
		if rd := apply.ReplicaOnNode(d, n); rd == nil || rd.GetType() != kvpb.ReplicaType_REPLICA_TYPE_VOTER {
			t.Fatalf("after the joint change node %d is %v (%s)", n, rd, describeReplicas(d))
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d writes during the changes, %d failed (routing or ambiguity)", writes.Load(), writeErrs.Load())
	if writes.Load() == 0 {
		t.Fatal("no write succeeded during the membership changes")
	}
	idx, err := c.put(ctx, keys.FirstUserRangeID, "final", "x")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the new voters to apply", func() bool {
		for _, n := range []uint64{4, 5, 6} {
			if c.storeOf(n).mustReplica(keys.FirstUserRangeID).AppliedIndex() < idx {
				return false
			}
		}
		return true
	})
	if _, ok := c.get(6, "load00000"); !ok {
		t.Fatal("node 6 lacks data written before it joined")
	}
	// The meta copy of range 2's descriptor followed the changes.
	ml := c.leader(keys.MetaRangeID)
	waitFor(t, 10*time.Second, "meta to hold the final descriptor", func() bool {
		ds, err := ml.store.MetaLookup(nil, 0)
		return err == nil && len(ds) == 1 && ds[0].GetGeneration() >= d.GetGeneration()
	})
}

func (s *Store) mustReplica(rangeID uint64) *Replica {
	r, err := s.Replica(rangeID)
	if err != nil {
		panic(err)
	}
	return r
}

// TestNodeRegistry: registering allocates IDs from meta (the same address
// keeps its ID), works from a follower of meta (forwarded to its leader),
// and deregistering removes the entry.
func TestNodeRegistry(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 30*time.Second)
	l := c.leader(keys.MetaRangeID)
	var follower *Store
	for id, s := range c.running() {
		if id != l.id {
			follower = s
			break
		}
	}
	// Registration is idempotent by address, so an ambiguous outcome (the
	// meta leader may change while the cluster settles) is retried.
	register := func(s *Store, addr string) (uint64, error) {
		for {
			id, err := s.RegisterNode(ctx, &kvpb.NodeDescriptor{Address: addr})
			if (errors.Is(err, ErrAmbiguous) || errors.Is(err, ErrUnavailable)) && ctx.Err() == nil {
				t.Logf("RegisterNode(%s): %v; retrying", addr, err)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			return id, err
		}
	}
	id, err := register(follower, "127.0.0.1:9004")
	if err != nil || id != 4 {
		t.Fatalf("RegisterNode = %d, %v; want 4", id, err)
	}
	again, err := register(l.store, "127.0.0.1:9004")
	if err != nil || again != 4 {
		t.Fatalf("registering the same address again = %d, %v", again, err)
	}
	next, err := register(l.store, "127.0.0.1:9005")
	if err != nil || next != 5 {
		t.Fatalf("next RegisterNode = %d, %v", next, err)
	}
	if err := follower.DeregisterNode(ctx, 4); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "node 4 to leave the registry", func() bool {
		nodes, err := l.store.MetaNodes()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.GetNodeId() == 4 {
				return false
			}
		}
		return len(nodes) == 4
	})
	if _, err := l.store.RegisterNode(ctx, &kvpb.NodeDescriptor{}); !errors.Is(err, ErrInvalidChange) {
		t.Fatalf("registering a node without an address: %v", err)
	}
}

// TestMetaRepair: when the meta update that follows a replica change is
// lost, the range's leader repairs meta's copy of its descriptor.
func TestMetaRepair(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.TestingSkipMetaUpdates = true
		cfg.MetaCheckInterval = 100 * time.Millisecond
	})
	ctx := ctxT(t, 30*time.Second)
	l := c.leader(keys.FirstUserRangeID)
	var victim uint64
	for _, id := range c.ids() {
		if id != l.id {
			victim = id
			break
		}
	}
	d, err := l.store.ChangeReplicas(ctx, keys.FirstUserRangeID, []*kvpb.ReplicaChange{{Kind: kvpb.ReplicaChange_REMOVE, NodeId: victim}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "meta to catch up with the descriptor", func() bool {
		ds, err := c.leader(keys.MetaRangeID).store.MetaLookup([]byte("k"), 0)
		return err == nil && len(ds) == 1 && ds[0].GetGeneration() == d.GetGeneration()
	})
}

// raftStateKeys returns the keys of db under range rangeID's local spans
// other than its tombstone: what a destroyed replica must not leave.
func raftStateKeys(t *testing.T, db *storage.DB, rangeID uint64) [][]byte {
	t.Helper()
	var out [][]byte
	for _, sp := range []keys.Span{keys.RangeLocalSpan(rangeID), keys.NodeLocalRangeSpan(rangeID)} {
		it, err := db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End, KeysOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			if k := it.Key(); !bytes.Equal(k, keys.TombstoneKey(rangeID)) {
				out = append(out, k)
			}
		}
		err = it.Error()
		it.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestMetaCheckReadsMetaOncePerGeneration: a leader whose descriptor meta
// was found holding does not read meta again (a scan of every descriptor)
// until its generation changes, and reads it again after a split.
func TestMetaCheckReadsMetaOncePerGeneration(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.MetaCheckInterval = time.Millisecond
		cfg.DisableQuiescence = true // keep the leader ticking, and checking
	})
	ctx := ctxT(t, 30*time.Second)
	rid := uint64(keys.FirstUserRangeID)
	seen := func() (uint64, uint64) {
		r, err := c.leader(rid).store.Replica(rid)
		if err != nil {
			t.Fatal(err)
		}
		var gen, seen uint64
		r.raftMu.Lock()
		gen, seen = r.desc.GetGeneration(), r.metaSeenGen
		r.raftMu.Unlock()
		return gen, seen
	}
	waitFor(t, 10*time.Second, "the leader to find meta holding its descriptor", func() bool {
		gen, s := seen()
		return s == gen && gen > 0
	})
	gen0, _ := seen()
	if _, _, err := c.leader(rid).store.Split(ctx, rid, []byte("m")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the leader to find meta holding its split descriptor", func() bool {
		gen, s := seen()
		return gen > gen0 && s == gen
	})
}
