package sim

import (
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// TestReplicaCheckSeesDivergence: a key written behind Raft's back into
// one node's engine makes that node's replica differ from the others at
// the same applied index, and the replica check reports it.
func TestReplicaCheckSeesDivergence(t *testing.T) {
	opts := Options{Seed: 1}
	opts.setDefaults()
	cryptotest.SetGlobalRandom(t, opts.Seed)
	root := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, opts, root)
		defer s.shutdown()
		s.bootstrap()
		s.net.params = netParams{minDelay: 100 * time.Microsecond, maxDelay: time.Millisecond}
		quiet := s.clock.Now().Add(time.Second)
		s.loop(func() bool { return !s.clock.Now().Before(quiet) })
		s.checker.checkReplicas(true)
		if len(s.res.Violations) > 0 {
			t.Fatalf("violations before the stray write: %v", s.res.Violations)
		}
		b := storage.NewBatch(64)
		b.Put(append([]byte{keys.UserPrefix}, mvcc.EncodeKey([]byte("k1"), hlc.Timestamp{WallTime: 1})...), []byte("stray"))
		if err := s.nodes[0].db.Write(b, storage.NoSync); err != nil {
			t.Fatal(err)
		}
		s.checker.checkReplicas(true)
		if len(s.res.Violations) == 0 {
			t.Fatal("the replica check did not see node 1's stray key")
		}
		t.Logf("reported: %s", s.res.Violations[0])
	})
}
