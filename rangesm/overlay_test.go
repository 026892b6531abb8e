package rangesm

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// TestOverlayReadsItsOwnWrites stages random puts, deletes and range
// deletions over a small key space on top of an engine holding some of the
// keys, and after each checks every key's read against a model: the last
// staged write wins, a later range deletion hides earlier writes, and
// untouched keys read through to the engine. Batches run from a few writes
// (read by scanning) to hundreds (read through the index), and the
// overlay is reset (and every other time released) and reused between
// them.
func TestOverlayReadsItsOwnWrites(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), keys.WithUserVersions(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%03d", i)) }
	engine := map[string]string{}
	for i := 0; i < 60; i += 3 {
		if err := db.Put(key(i), []byte("engine"), storage.NoSync); err != nil {
			t.Fatal(err)
		}
		engine[string(key(i))] = "engine"
	}
	var a overlay
	a.init(db, db.Write, prometheus.NewCounter(prometheus.CounterOpts{Name: "test_apply_writes"}))
	rng := rand.New(rand.NewPCG(3, 4))
	for round, n := range []int{3, 15, 17, 40, 300, 5, 600, 2} {
		model := map[string]*string{} // nil: deleted in the overlay
		for i := 0; i < n; i++ {
			k := key(rng.IntN(60))
			switch rng.IntN(6) {
			case 0:
				a.del(k)
				model[string(k)] = nil
			case 1:
				lo, hi := rng.IntN(60), rng.IntN(60)
				if lo > hi {
					lo, hi = hi, lo
				}
				a.delRange(key(lo), key(hi))
				for j := lo; j < hi; j++ {
					model[string(key(j))] = nil
				}
			default:
				v := fmt.Sprintf("r%d-%d", round, i)
				a.put(k, []byte(v))
				model[string(k)] = &v
			}
			if i%7 != 0 && i != n-1 {
				continue
			}
			for j := 0; j < 60; j++ {
				k := key(j)
				want, wantFound := engine[string(k)], false
				if _, ok := engine[string(k)]; ok {
					wantFound = true
				}
				if m, ok := model[string(k)]; ok {
					wantFound = m != nil
					if m != nil {
						want = *m
					}
				}
				got, found, err := a.get(k)
				if err != nil {
					t.Fatal(err)
				}
				if found != wantFound || (found && string(got) != want) {
					t.Fatalf("round %d, write %d: %s = %q (found %v), want %q (found %v)", round, i, k, got, found, want, wantFound)
				}
			}
		}
		a.reset() // not written: the engine keeps its state
		if round%2 == 1 {
			// As a range going to rest: the next round starts from nothing.
			a.release()
			if a.batch.Len() != 12 || a.points != nil || a.keys != nil || a.index != nil || a.ranges != nil {
				t.Fatalf("round %d: release kept a batch of %d bytes, %d points, an index of %d", round, a.batch.Len(), cap(a.points), len(a.index))
			}
		}
	}
}
