package tests

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
)

// TestClusterBoundedStaleFollowerReads: a follower serves a BOUNDED_STALE
// read at its frontier when that is fresh enough, without the leader;
// when it is not (the range has been idle), the follower sends the client
// to the leader, the leader serves it and keeps the range's frontier
// fresh, and the follower then serves the next ones.
func TestClusterBoundedStaleFollowerReads(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	leader, _ := c.leader(userRange, 10*time.Second)
	var follower uint64
	for _, n := range c.all() {
		if n.id != leader {
			follower = n.id
			break
		}
	}
	fkv, _, done := c.raw(follower)
	defer done()
	lkv, _, ldone := c.raw(leader)
	defer ldone()
	read := func(kv kvpb.KVClient, staleness time.Duration) (*kvpb.GetResponse, error) {
		return kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k"), Header: &kvpb.RequestHeader{
			ReadConsistency: kvpb.ReadConsistency_READ_CONSISTENCY_BOUNDED_STALE,
			MaxStalenessUs:  staleness.Microseconds()}})
	}
	// A generous bound: the follower serves it once it has applied the
	// write, at a timestamp within the bound.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := read(fkv, time.Minute)
		if err == nil && string(resp.GetValue()) == "v" {
			rt := resp.GetHeader().GetReadTimestamp()
			if rt == nil || time.Since(time.Unix(0, rt.GetWallNanos())) > time.Minute || resp.GetHeader().GetNodeId() != follower {
				t.Fatalf("follower read = %v", resp)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower never served a bounded-staleness read: %v, %v", resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := c.metric(follower, "shale_follower_reads_total"); n < 1 {
		t.Fatalf("follower's shale_follower_reads_total = %v", n)
	}
	// The range idles past a tight bound: the follower refuses.
	time.Sleep(time.Second)
	if _, err := read(fkv, 300*time.Millisecond); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("follower read of an idle range with a 300 ms bound = %v, want NotLeader", err)
	}
	// The leader serves it, and keeps the frontier fresh: the follower
	// serves the next ones.
	if resp, err := read(lkv, 300*time.Millisecond); err != nil || string(resp.GetValue()) != "v" {
		t.Fatalf("leader's bounded-staleness read = %v, %v", resp, err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		resp, err := read(fkv, 300*time.Millisecond)
		if err == nil && string(resp.GetValue()) == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower never caught up with a fresh frontier: %v, %v", resp, err)
		}
		// Keep the demand up, as a client sent to the leader would.
		_, _ = read(lkv, 300*time.Millisecond)
		time.Sleep(50 * time.Millisecond)
	}
	// A BOUNDED_STALE read without a bound is refused.
	_, err := fkv.Get(ctx, &kvpb.GetRequest{Key: []byte("k"), Header: &kvpb.RequestHeader{
		ReadConsistency: kvpb.ReadConsistency_READ_CONSISTENCY_BOUNDED_STALE}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("BOUNDED_STALE without max_staleness_us = %v, want InvalidArgument", err)
	}
}
