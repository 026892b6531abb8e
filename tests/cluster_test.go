package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// Multi-process tests of replication (issue 5): real shale processes on
// loopback, driven through the client library. Every load loop is bounded
// in count and time. SHALE_LONG_TESTS=1 makes the loads larger.

func longTests() bool { return os.Getenv("SHALE_LONG_TESTS") != "" }

const (
	metaRange = 1 // the meta range (descriptors, the oracle's window)
	userRange = 2 // the range holding the whole user key space
)

// TestClusterReplicatesToAll: writes through any node reach every
// replica.
func TestClusterReplicatesToAll(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < 300; i++ {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprint("v", i))); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	leader, _ := c.leader(userRange, 10*time.Second)
	rs, err := c.rangeState(leader, userRange)
	if err != nil {
		t.Fatal(err)
	}
	for _, cn := range c.all() {
		c.waitApplied(cn.id, userRange, rs.GetRaft().GetAppliedIndex(), 20*time.Second)
		for i := 0; i < 300; i++ {
			v, found, err := c.staleGet(cn.id, fmt.Sprintf("k%03d", i))
			if err != nil || !found || v != fmt.Sprint("v", i) {
				t.Fatalf("node %d: k%03d = %q, %v, %v", cn.id, i, v, found, err)
			}
		}
	}
}

// TestClusterLeaderKilled: the leader is SIGKILLed under load; a new leader
// is elected within a few election timeouts and no acknowledged write is
// lost. The killed node comes back and catches up.
func TestClusterLeaderKilled(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	w := startWriter(cl, "lk", 8, 0, 60*time.Second)
	w.waitMore(t, 50, 30*time.Second)
	old, _ := c.leader(userRange, 10*time.Second)
	before := w.count()
	c.node(old).kill()
	killed := time.Now()
	var newLeader uint64
	var took time.Duration
	for {
		for _, cn := range c.all() {
			if cn.id == old {
				continue
			}
			if rs, err := c.rangeState(cn.id, userRange); err == nil && rs.GetRaft().GetState() == "leader" {
				newLeader, took = cn.id, time.Since(killed)
			}
		}
		if newLeader != 0 || time.Since(killed) > 30*time.Second {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if newLeader == 0 {
		t.Fatal("no new leader within 30s of killing the leader")
	}
	t.Logf("leader n%d killed after %d acknowledged writes; n%d leads %v later", old, before, newLeader, took.Round(time.Millisecond))
	// PreVote and CheckQuorum: followers notice within an election timeout
	// (up to 2x randomized), then one pre-vote and one vote round.
	if limit := 4 * electionTimeout; took > limit {
		t.Errorf("electing a new leader took %v, more than %v", took, limit)
	}
	w.waitMore(t, 50, 30*time.Second) // writes go on through the new leader
	acked := w.finish()
	if len(acked) <= before {
		t.Fatalf("no write acknowledged after the leader was killed (%d before, %d after)", before, len(acked))
	}
	t.Logf("%d writes acknowledged, %d ambiguous, %d failed (last: %v)", len(acked), w.ambiguous, w.failed, w.lastErr)
	checkAcked(t, cl, acked)

	c.start(old)
	rs, err := c.rangeState(newLeader, userRange)
	if err != nil {
		t.Fatal(err)
	}
	c.waitApplied(old, userRange, rs.GetRaft().GetAppliedIndex(), 30*time.Second)
}

// TestClusterMinorityPartition cuts the leader off from the other two
// nodes with iptables: the majority elects a leader and keeps serving;
// once healed, the cut-off node catches up.
func TestClusterMinorityPartition(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: cutting a node off with iptables needs root")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("skipping: iptables is not installed (scripts/deps --chaos installs it)")
	}
	c := newCluster(t, 3)
	isolated, _ := c.leader(userRange, 10*time.Second)
	var majority []uint64
	for _, cn := range c.all() {
		if cn.id != isolated {
			majority = append(majority, cn.id)
		}
	}
	heal := partition(t, c.node(isolated).ip)
	defer heal()
	cut := time.Now()

	cl := c.client(majority...)
	var newLeader uint64
	for {
		if id, ok := c.leaderAmong(majority, userRange); ok {
			newLeader = id
			break
		}
		if time.Since(cut) > 30*time.Second {
			t.Fatal("the majority elected no leader within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(cut)
	t.Logf("node %d cut off; node %d leads the majority after %v", isolated, newLeader, took.Round(time.Millisecond))
	w := startWriter(cl, "part", 8, 2000, 30*time.Second)
	acked := w.wait()
	if len(acked) < 100 {
		t.Fatalf("the majority acknowledged only %d writes while partitioned (%d ambiguous, %d failed, last error %v)",
			len(acked), w.ambiguous, w.failed, w.lastErr)
	}
	checkAcked(t, cl, acked)
	t.Logf("majority served %d writes, %d ambiguous, %d failed", len(acked), w.ambiguous, w.failed)

	heal()
	rs, err := c.rangeState(newLeader, userRange)
	if err != nil {
		t.Fatal(err)
	}
	c.waitApplied(isolated, userRange, rs.GetRaft().GetAppliedIndex(), 30*time.Second)
	for k, v := range acked {
		got, found, err := c.staleGet(isolated, k)
		if err != nil || !found || got != v {
			t.Fatalf("healed node %d: %s = %q %v %v", isolated, k, got, found, err)
		}
		break
	}
}

// leaderAmong returns the leader of rangeID among ids, if one says so.
func (c *testCluster) leaderAmong(ids []uint64, rangeID uint64) (uint64, bool) {
	for _, id := range ids {
		if rs, err := c.rangeState(id, rangeID); err == nil && rs.GetRaft().GetState() == "leader" {
			return id, true
		}
	}
	return 0, false
}

// partition drops every packet to or from ip and returns the function
// that removes the rules (idempotent; also run at cleanup).
func partition(t testing.TB, ip string) func() {
	t.Helper()
	tag := "shale-test-" + strconv.Itoa(os.Getpid())
	rules := [][]string{
		{"INPUT", "-s", ip, "-j", "DROP", "-m", "comment", "--comment", tag},
		{"INPUT", "-d", ip, "-j", "DROP", "-m", "comment", "--comment", tag},
	}
	for _, r := range rules {
		if out, err := exec.Command("iptables", append([]string{"-I"}, r...)...).CombinedOutput(); err != nil {
			t.Skipf("skipping: iptables refused a rule (%v): %s", err, out)
		}
	}
	healed := false
	heal := func() {
		if healed {
			return
		}
		healed = true
		for _, r := range rules {
			if out, err := exec.Command("iptables", append([]string{"-D"}, r...)...).CombinedOutput(); err != nil {
				t.Errorf("removing iptables rule %v: %v: %s", r, err, out)
			}
		}
	}
	t.Cleanup(heal)
	return heal
}

// TestClusterSnapshotAfterTruncation: a node is down while 100k writes go
// through the others; the leader truncates its log past the node, which
// catches up by snapshot when it returns.
func TestClusterSnapshotAfterTruncation(t *testing.T) {
	writes := 100_000
	if longTests() {
		writes = 500_000
	}
	c := newCluster(t, 3, "--raft-log-max-entries", "5000")
	leader, _ := c.leader(userRange, 10*time.Second)
	down := uint64(1)
	if down == leader {
		down = 2
	}
	c.stop(down)
	var up []uint64
	for _, cn := range c.all() {
		if cn.id != down {
			up = append(up, cn.id)
		}
	}
	cl := c.client(up...)
	start := time.Now()
	w := startWriter(cl, "snap", 64, writes, 5*time.Minute)
	acked := w.wait()
	t.Logf("%d writes acknowledged in %v (%d ambiguous, %d failed) with node %d down",
		len(acked), time.Since(start).Round(time.Millisecond), w.ambiguous, w.failed, down)
	if len(acked) < writes*9/10 {
		t.Fatalf("only %d of %d writes acknowledged (last error %v)", len(acked), writes, w.lastErr)
	}
	leader, _ = c.leaderAmong(up, userRange)
	rs, err := c.rangeState(leader, userRange)
	if err != nil {
		t.Fatal(err)
	}
	if tr := rs.GetRaft().GetTruncatedIndex(); tr < uint64(writes/2) {
		t.Fatalf("leader's log truncated only to %d after %d writes", tr, writes)
	}
	c.start(down)
	c.waitApplied(down, userRange, rs.GetRaft().GetAppliedIndex(), 120*time.Second)
	if got := c.metric(down, "shale_raft_snapshots_received_total"); got < 1 {
		t.Fatalf("node %d caught up without a snapshot (snapshots received: %v)", down, got)
	}
	// Spot-check the returned node's own copy.
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	for i := 0; i < 300; i++ {
		k := keys[rng.IntN(len(keys))]
		v, found, err := c.staleGet(down, k)
		if err != nil || !found || v != acked[k] {
			t.Fatalf("node %d after the snapshot: %s = %q %v %v", down, k, v, found, err)
		}
	}
}

// TestClusterAddRemoveNodesUnderLoad: a fourth node joins, gets a voter of
// every range (learner, snapshot, promotion); then node 1 is removed from
// every range and from the cluster. Writes go on throughout and none that
// was acknowledged is lost.
func TestClusterAddRemoveNodesUnderLoad(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	w := startWriter(cl, "mem", 8, 0, 120*time.Second)
	w.waitMore(t, 20, 30*time.Second)

	n4 := c.newNode(4)
	c.start(4, "--join", c.node(1).grpcAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	resp, err := cl.AddNode(ctx, &kvpb.NodeDescriptor{Address: n4.grpcAddr})
	if err != nil || resp.GetNodeId() != 4 {
		t.Fatalf("AddNode = %v, %v; want node 4 (it registered itself when it joined)", resp, err)
	}
	for _, rangeID := range []uint64{1, userRange} {
		d, err := cl.ChangeReplicas(ctx, rangeID, &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: 4})
		if err != nil {
			t.Fatalf("adding node 4 to range %d: %v", rangeID, err)
		}
		t.Logf("range %d: generation %d, %d replicas", rangeID, d.GetGeneration(), len(d.GetReplicas()))
	}
	if got := c.metric(4, "shale_raft_snapshots_received_total"); got < 2 {
		t.Fatalf("node 4 received %v snapshots; want one per range", got)
	}
	if err := cl.RemoveNode(ctx, 1, true); err != nil {
		t.Fatalf("removing node 1: %v", err)
	}
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nodes.GetNodes() {
		if ns.GetNode().GetNodeId() == 1 {
			t.Fatal("node 1 is still registered after its removal")
		}
	}
	w.waitMore(t, 20, 30*time.Second)
	acked := w.finish()
	t.Logf("%d writes acknowledged during the changes, %d ambiguous, %d failed", len(acked), w.ambiguous, w.failed)
	c.node(1).kill()
	checkAcked(t, c.client(2, 3, 4), acked)
	leader, _ := c.leaderAmong([]uint64{2, 3, 4}, userRange)
	rs, err := c.rangeState(leader, userRange)
	if err != nil {
		t.Fatal(err)
	}
	c.waitApplied(4, userRange, rs.GetRaft().GetAppliedIndex(), 30*time.Second)
	for k, v := range acked {
		got, found, err := c.staleGet(4, k)
		if err != nil || !found || got != v {
			t.Fatalf("node 4: %s = %q %v %v", k, got, found, err)
		}
	}
}

// TestClusterRestartEveryNode: a rolling restart under load, then every
// node stopped at once and started again; nothing acknowledged is lost and
// the cluster serves afterwards.
func TestClusterRestartEveryNode(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	w := startWriter(cl, "roll", 8, 0, 120*time.Second)
	for _, cn := range c.all() {
		w.waitMore(t, 20, 30*time.Second)
		c.stop(cn.id)
		c.start(cn.id)
		c.waitLeaders(1, userRange)
	}
	w.waitMore(t, 20, 30*time.Second)
	acked := w.finish()
	t.Logf("rolling restart: %d writes acknowledged, %d ambiguous, %d failed", len(acked), w.ambiguous, w.failed)
	if len(acked) == 0 {
		t.Fatal("no write acknowledged during the rolling restart")
	}
	for _, cn := range c.all() {
		c.stop(cn.id)
	}
	for _, cn := range c.all() {
		c.start(cn.id)
	}
	c.waitLeaders(1, userRange)
	checkAcked(t, cl, acked)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.Put(ctx, []byte("after-full-restart"), []byte("x")); err != nil {
		t.Fatalf("write after restarting every node: %v", err)
	}
}

// TestClusterPausedLeaderServesNoStaleRead pauses the leader with SIGSTOP
// long enough for the others to elect a new one and write a new value,
// then resumes it and reads from it at once. Its lease is measured on the
// monotonic clock, so it must know the lease expired while it was paused:
// the read may fail (it is no longer the leader) but must never return the
// old value. (A lease counted in Raft ticks would not: a paused process
// does not tick.)
func TestClusterPausedLeaderServesNoStaleRead(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.Put(ctx, []byte("k"), []byte("old")); err != nil {
		t.Fatal(err)
	}
	old, _ := c.leader(userRange, 10*time.Second)
	kv, _, done := c.raw(old)
	defer done()
	// Make sure the old leader holds a lease: reads keep it renewed.
	for i := 0; i < 20; i++ {
		if _, err := kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rs, err := c.rangeState(old, userRange); err != nil || rs.GetRaft().GetState() != "leader" {
		t.Skipf("leadership moved before the pause (%v, %v)", rs.GetRaft(), err)
	}
	cn := c.node(old)
	if err := cn.proc.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = cn.proc.Resume()
		}
	}
	defer resume()
	var others []uint64
	for _, n := range c.all() {
		if n.id != old {
			others = append(others, n.id)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := c.leaderAmong(others, userRange); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no new leader while the old one was paused")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.client(others...).Put(ctx, []byte("k"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	// Reads sent while it is still paused wait in its sockets and are
	// served the moment it resumes, before it hears of the new term.
	var mu sync.Mutex
	stale := 0
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				resp, err := kv.Get(rctx, &kvpb.GetRequest{Key: []byte("k")})
				rcancel()
				if err == nil && string(resp.GetValue()) == "old" {
					mu.Lock()
					stale++
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	resume()
	wg.Wait()
	if stale > 0 {
		t.Fatalf("the resumed old leader served %d stale linearizable reads", stale)
	}
}
