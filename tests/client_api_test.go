package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestClientStatusOfPausedNode pauses the first of three endpoints with
// SIGSTOP: StatusOf asks every endpoint in parallel under its own
// deadline, so the other two answer although the paused one uses up its
// whole per-node time. (Asked one after another under one context, the
// paused node ate the deadline of all three.)
func TestClientStatusOfPausedNode(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client(1, 2, 3)
	paused := c.node(1)
	if err := paused.proc.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = paused.proc.Resume() }()
	// SIGSTOP is delivered asynchronously: wait until the kernel shows
	// the process stopped.
	waitUntil(t, 5*time.Second, "node 1 stopped", func() string {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", paused.proc.Pid()))
		if err != nil {
			return err.Error()
		}
		// The state follows the parenthesised command name.
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) == 0 || f[0] != "T" {
			return "state " + string(stat)
		}
		return ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	sts, errs := cl.StatusOf(ctx, 2*time.Second)
	if len(sts) != 3 || len(errs) != 3 {
		t.Fatalf("StatusOf returned %d statuses and %d errors for 3 endpoints", len(sts), len(errs))
	}
	if errs[0] == nil || !errors.Is(errs[0], client.ErrUnavailable) {
		t.Fatalf("the paused node's status: %v, want ErrUnavailable", errs[0])
	}
	for i := 1; i < 3; i++ {
		if errs[i] != nil || sts[i].GetNode().GetNodeId() != uint64(i+1) {
			t.Fatalf("endpoint %d (node %d, not paused): status %v, error %v", i, i+1, sts[i].GetNode(), errs[i])
		}
	}
	// NodeStatuses asks every registered node, not only those dialled.
	// (Nodes reads meta, which may first elect a leader without node 1.)
	only2 := c.client(2)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	all, err := only2.NodeStatuses(ctx2, 2*time.Second)
	if err != nil || len(all) != 3 {
		t.Fatalf("NodeStatuses = %v, %v; want 3 nodes", all, err)
	}
	for _, ns := range all {
		paused := ns.NodeID == 1
		if paused != (ns.Err != nil) || paused == (ns.Status != nil) || ns.Address != c.node(ns.NodeID).grpcAddr {
			t.Fatalf("NodeStatuses: node %d at %s: status %v, error %v (node 1 is paused)", ns.NodeID, ns.Address, ns.Status.GetNode(), ns.Err)
		}
	}
}

// TestClientRangeInfo checks that RangeInfo names the range holding a key,
// its leader as the leader itself reports, and its term, and follows a
// leadership transfer to a newer term.
func TestClientRangeInfo(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := cl.RangeInfo(ctx, []byte("some-key"))
	if err != nil {
		t.Fatal(err)
	}
	leader, _ := c.leader(userRange, 10*time.Second)
	rs, err := c.rangeState(leader, userRange)
	if err != nil {
		t.Fatal(err)
	}
	if info.RangeID != userRange || len(info.Replicas) != 3 || info.LeaderNodeID != leader ||
		info.Term != rs.GetRaft().GetTerm() || info.LeaderAddress != c.node(leader).grpcAddr {
		t.Fatalf("RangeInfo = %+v; want range %d, 3 replicas, leader %d at %s in term %d",
			info, userRange, leader, c.node(leader).grpcAddr, rs.GetRaft().GetTerm())
	}
	list, err := cl.RangeList(ctx)
	if err != nil || len(list) != 2 || list[1].Descriptor.GetRangeId() != userRange || list[1].LeaderNodeID == 0 {
		t.Fatalf("RangeList = %+v, %v; want meta and range %d with a leader", list, err, userRange)
	}
	target := leader%3 + 1
	if err := cl.TransferLeader(ctx, userRange, target); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "RangeInfo naming the new leader", func() string {
		after, err := cl.RangeInfo(ctx, []byte("some-key"))
		switch {
		case err != nil:
			return err.Error()
		case after.LeaderNodeID != target || after.Term <= info.Term:
			return fmt.Sprintf("leader %d term %d (before: leader %d term %d)", after.LeaderNodeID, after.Term, leader, info.Term)
		}
		return ""
	})
}
