package rangesm

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// metaHost is the apply.Host of a lone meta replica: it writes the
// batches the state machine cuts early and creates no other replicas.
type metaHost struct{ db *storage.DB }

func (h metaHost) NodeID() uint64 { return 1 }
func (h metaHost) Counters() apply.Counters {
	return apply.Counters{Writes: prometheus.NewCounter(prometheus.CounterOpts{Name: "w"}),
		DedupHits: prometheus.NewCounter(prometheus.CounterOpts{Name: "d"})}
}
func (h metaHost) WriteEngine(b *storage.Batch, wo storage.WriteOptions) error {
	return h.db.Write(b, wo)
}
func (h metaHost) CreatesSplitReplica(*kvpb.RangeDescriptor) (bool, error) { return false, nil }
func (h metaHost) RangeApplied(uint64) (uint64, bool, bool)                { return 0, false, false }
func (h metaHost) TakeOver(*kvpb.RangeDescriptor, uint64, uint64) error    { return nil }

func userDesc(id, gen uint64, start, end int) *kvpb.RangeDescriptor {
	return &kvpb.RangeDescriptor{RangeId: id, Generation: gen,
		StartKey: fmt.Appendf(nil, "k%08d", start), EndKey: fmt.Appendf(nil, "k%08d", end)}
}

// openMeta opens a store whose meta holds n user range descriptors (range
// i+2 spans keys i to i+1), and meta's state machine over it.
func openMeta(tb testing.TB, n int) (*storage.DB, *Factory, *Range) {
	tb.Helper()
	db, err := storage.Open(filepath.Join(tb.TempDir(), "db"), keys.WithUserVersions(nil))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	b := storage.NewBatch(0)
	for i := 0; i < n; i++ {
		d := userDesc(uint64(i+2), 1, i, i+1)
		v, err := logstore.EncodeDescriptor(d)
		if err != nil {
			tb.Fatal(err)
		}
		b.Put(keys.MetaKeyFor(d), v)
	}
	if err := db.Write(b, storage.NoSync); err != nil {
		tb.Fatal(err)
	}
	f, r := loadMeta(tb, db)
	return db, f, r
}

// loadMeta loads meta's state machine the way a store does on open.
func loadMeta(tb testing.TB, db *storage.DB) (*Factory, *Range) {
	tb.Helper()
	f, err := NewFactory(Config{Engine: db})
	if err != nil {
		tb.Fatal(err)
	}
	sm, err := f.New(keys.MetaRangeID, metaHost{db})
	if err != nil {
		tb.Fatal(err)
	}
	return f, sm.(*Range)
}

func putDesc(tb testing.TB, r *Range, d *kvpb.RangeDescriptor) {
	tb.Helper()
	res, err := r.applyPutDescriptor(&command.Command{Kind: command.KindPutDescriptor, Descriptor: d})
	if err != nil || res.Code != command.CodeOK {
		tb.Fatalf("put descriptor of range %d: %v %v", d.GetRangeId(), res, err)
	}
	if err := r.flush(); err != nil {
		tb.Fatal(err)
	}
}

// checkMeta checks that every reader of meta finds want (range ID ->
// generation; 0: absent): the apply loop's index, the node's meta reader,
// and a full scan.
func checkMeta(t *testing.T, db *storage.DB, f *Factory, r *Range, want map[uint64]uint64) {
	t.Helper()
	if _, _, known := r.metaIdx.lookup(0); !known {
		t.Fatal("meta's descriptor index is not built: every lookup scans")
	}
	for id, gen := range want {
		scanned, _, err := findMetaDescriptor(db, id)
		if err != nil {
			t.Fatal(err)
		}
		indexed, _, err := r.metaIdx.find(db, id, true)
		if err != nil {
			t.Fatal(err)
		}
		read, err := f.Meta().Descriptor(id)
		if err != nil {
			t.Fatal(err)
		}
		for name, d := range map[string]*kvpb.RangeDescriptor{"scan": scanned, "index": indexed, "reader": read} {
			if d.GetGeneration() != gen {
				t.Errorf("range %d by %s: generation %d, want %d", id, name, d.GetGeneration(), gen)
			}
		}
	}
}

// TestMetaIndexFollowsSplitMergeRestart follows descriptor writes through
// a split, a merge that puts the merged range over the right side's key,
// a late stale copy of the merged-away range, a restart and a state
// replaced under the replica (as a snapshot does, then Restore).
func TestMetaIndexFollowsSplitMergeRestart(t *testing.T) {
	db, f, r := openMeta(t, 3) // ranges 2, 3, 4
	// Split range 3 [1,2) at 1.5 -> 3 [1,15) and 9 [15,2): keys are
	// scaled so the split key sorts between.
	putDesc(t, r, &kvpb.RangeDescriptor{RangeId: 3, Generation: 2,
		StartKey: []byte("k00000001"), EndKey: []byte("k00000001x")})
	putDesc(t, r, &kvpb.RangeDescriptor{RangeId: 9, Generation: 2,
		StartKey: []byte("k00000001x"), EndKey: []byte("k00000002")})
	checkMeta(t, db, f, r, map[uint64]uint64{2: 1, 3: 2, 4: 1, 9: 2})
	// Merge 9 into 3: the merged range 3 lands at 9's key.
	putDesc(t, r, &kvpb.RangeDescriptor{RangeId: 3, Generation: 3,
		StartKey: []byte("k00000001"), EndKey: []byte("k00000002")})
	checkMeta(t, db, f, r, map[uint64]uint64{3: 3, 9: 0})
	// A late copy of 9 is not stored over the merged range.
	putDesc(t, r, &kvpb.RangeDescriptor{RangeId: 9, Generation: 2,
		StartKey: []byte("k00000001x"), EndKey: []byte("k00000002")})
	checkMeta(t, db, f, r, map[uint64]uint64{3: 3, 9: 0})
	// Restart.
	f, r = loadMeta(t, db)
	checkMeta(t, db, f, r, map[uint64]uint64{2: 1, 3: 3, 4: 1, 9: 0})
	// Meta's state replaced under the replica, then Restore.
	b := storage.NewBatch(0)
	d := userDesc(7, 5, 10, 11)
	v, _ := logstore.EncodeDescriptor(d)
	b.Put(keys.MetaKeyFor(d), v)
	b.Delete(keys.MetaKeyFor(userDesc(2, 1, 0, 1)))
	if err := db.Write(b, storage.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(); err != nil {
		t.Fatal(err)
	}
	checkMeta(t, db, f, r, map[uint64]uint64{2: 0, 3: 3, 7: 5})
	putDesc(t, r, userDesc(2, 4, 0, 1))
	putDesc(t, r, userDesc(7, 6, 10, 11))
	checkMeta(t, db, f, r, map[uint64]uint64{2: 4, 3: 3, 7: 6})
}

// BenchmarkPutDescriptor applies descriptor writes into meta holding n
// descriptors: each write bumps the generation of one range, as a split's
// or a replica change's does, spread over all n. Before meta kept an index
// by range ID each write decoded the descriptors before the written one
// (n/2 on average; all n for a split's new right-hand range). Allocations
// per write show it without a timer: run with -benchmem.
func BenchmarkPutDescriptor(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("descriptors=%d", n), func(b *testing.B) {
			_, _, r := openMeta(b, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				// 7919 is prime: the writes visit every range in turn.
				at := i * 7919 % n
				putDesc(b, r, userDesc(uint64(at+2), uint64(i+2), at, at+1))
				i++
			}
		})
	}
}
