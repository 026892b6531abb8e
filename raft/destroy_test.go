package raft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// TestCarveSpans: a removed replica deletes only what no other replica of
// its store owns.
func TestCarveSpans(t *testing.T) {
	sp := func(a, b string) keys.Span { return keys.Span{Start: []byte(a), End: []byte(b)} }
	cases := []struct {
		owned []keys.Span
		want  string
	}{
		{nil, "[a,z)"},
		{[]keys.Span{sp("m", "z")}, "[a,m)"},
		{[]keys.Span{sp("0", "c")}, "[c,z)"},
		{[]keys.Span{sp("p", "q"), sp("c", "f")}, "[a,c)[f,p)[q,z)"},
		{[]keys.Span{sp("c", "h"), sp("e", "k")}, "[a,c)[k,z)"},
		{[]keys.Span{sp("0", "zz")}, ""},
	}
	for _, c := range cases {
		got := ""
		for _, s := range carveSpans(sp("a", "z"), c.owned) {
			got += fmt.Sprintf("[%s,%s)", s.Start, s.End)
		}
		if got != c.want {
			t.Errorf("carving %v out of [a,z) = %s; want %s", c.owned, got, c.want)
		}
	}
}

// TestPeerAddressesSurviveRestart: a store restarted without its start-up
// peer list still knows every address it had learned, from the address
// book in its engine.
func TestPeerAddressesSurviveRestart(t *testing.T) {
	noPeers := false
	c := newTestCluster(t, 3, func(cfg *Config) {
		if noPeers {
			cfg.Peers = nil
		}
	})
	want := c.peerAddrs()
	c.storeOf(3).SetPeerAddress(9, "127.0.0.9:1") // learned later, e.g. from meta
	want[9] = "127.0.0.9:1"
	c.stop(3)
	noPeers = true
	c.start(3)
	got := c.storeOf(3).PeerAddresses()
	for id, a := range want {
		if got[id] != a {
			t.Fatalf("after a restart without peers, node %d's address is %q; want %q (book %v)", id, got[id], a, got)
		}
	}
}

// TestDestroyWaitsForStagedLogWrites: a replica removed while the log
// writer holds its entries staged (here, made to wait between staging
// and writing) is destroyed only after they are written, so the write
// cannot bring its log and HardState back under the keys a later replica
// of the range would start from.
func TestDestroyWaitsForStagedLogWrites(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.TestingLogWriteDelay = 20 * time.Millisecond })
	ctx := ctxT(t, 60*time.Second)
	rangeID := keys.FirstUserRangeID
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				c.put(wctx, rangeID, fmt.Sprintf("w%d-%06d", w, i), "v") // errors: the removal may disturb writes
				cancel()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	l := c.leader(rangeID)
	var victim uint64
	for _, id := range c.ids() {
		if id != l.id {
			victim = id
			break
		}
	}
	// Let the writes reach the victim's log writer before the removal.
	vr, err := c.storeOf(victim).Replica(rangeID)
	if err != nil {
		t.Fatal(err)
	}
	from := vr.Status().LastIndex
	waitFor(t, 10*time.Second, "the victim to append the writes", func() bool { return vr.Status().LastIndex >= from+50 })
	if _, err := l.store.ChangeReplicas(ctx, rangeID, []*kvpb.ReplicaChange{{Kind: kvpb.ReplicaChange_REMOVE, NodeId: victim}}); err != nil && !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("removing node %d from range %d: %v", victim, rangeID, err)
	}
	waitFor(t, 10*time.Second, "the removed replica to be destroyed", func() bool {
		_, err := c.storeOf(victim).Replica(rangeID)
		return errors.Is(err, ErrRangeNotFound)
	})
	// Stopping the store waits for the log writer's batch in flight, so
	// every write staged before the destruction is in the engine then.
	c.stop(victim)
	db, err := storage.Open(c.node(victim).dir, keys.WithUserVersions(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if left := raftStateKeys(t, db, rangeID); len(left) > 0 {
		t.Fatalf("node %d holds %d Raft state keys of its destroyed replica of range %d, first %x", victim, len(left), rangeID, left[0])
	}
}
