package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestWriteManyAcrossSplits: bulk writes through WriteMany, in random key
// order so that every call spans several ranges, while ranges split under
// it; then deletes and overwrites the same way. Every call must succeed
// (splits are routing, never an error for the application), and a full
// scan must hold exactly what was written.
func TestWriteManyAcrossSplits(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	admin := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const n, batch = 6000, 200
	key := func(i int) []byte { return []byte(fmt.Sprintf("wm-%05d", i)) }

	for _, at := range []int{2000, 4000} {
		if _, _, err := admin.Split(ctx, key(at)); err != nil {
			t.Fatal(err)
		}
	}
	// More splits while the load runs, at keys the batches keep hitting:
	// one after every few batches, from another client, so cl's cache is
	// stale each time and a split may land while a call is in flight.
	splitErr := make(chan error, 1)
	tick := make(chan struct{}, 64)
	go func() {
		for _, at := range []int{1000, 3000, 5000, 500, 5500} {
			<-tick
			if _, _, err := admin.Split(ctx, key(at)); err != nil {
				splitErr <- fmt.Errorf("split at %s: %w", key(at), err)
				return
			}
		}
		splitErr <- nil
	}()

	want := map[string]string{}
	order := rand.New(rand.NewPCG(7, 9)).Perm(n)
	for off := 0; off < n; off += batch {
		var muts []client.Mutation
		for _, i := range order[off:min(off+batch, n)] {
			v := fmt.Sprintf("v%d", i)
			muts = append(muts, client.PutOp(key(i), []byte(v)))
			want[string(key(i))] = v
		}
		if err := cl.WriteMany(ctx, muts...); err != nil {
			t.Fatalf("WriteMany of keys %d..%d: %v", off, off+batch, err)
		}
		if (off/batch)%5 == 2 {
			tick <- struct{}{}
		}
	}
	if err := <-splitErr; err != nil {
		t.Fatal(err)
	}
	if got := rangeCount(t, cl); got != 9 {
		t.Fatalf("meta lists %d ranges; want 9 (meta + 1 + 7 splits)", got)
	}

	// Deletes and overwrites in one call: every 7th key deleted, every
	// 5th (not deleted) rewritten, across all ranges. A key written twice
	// in one call keeps its last value.
	var muts []client.Mutation
	for i := 0; i < n; i++ {
		k := string(key(i))
		switch {
		case i%7 == 0:
			muts = append(muts, client.DeleteOp(key(i)))
			delete(want, k)
		case i%5 == 0:
			muts = append(muts, client.PutOp(key(i), []byte("first")), client.PutOp(key(i), []byte("second")))
			want[k] = "second"
		}
	}
	if err := cl.WriteMany(ctx, muts...); err != nil {
		t.Fatalf("WriteMany of deletes and overwrites: %v", err)
	}

	all := scanAll(t, cl, "wm-", "wm.", false, 500)
	if len(all) != len(want) {
		t.Fatalf("scan found %d keys; want %d", len(all), len(want))
	}
	for _, kv := range all {
		if w, ok := want[string(kv.Key)]; !ok || w != string(kv.Value) {
			t.Fatalf("scanned %s=%s; want %q (present %v)", kv.Key, kv.Value, w, ok)
		}
	}

	// A span is not a WriteMany mutation; nothing is written.
	err := cl.WriteMany(ctx, client.PutOp([]byte("wm-x"), []byte("x")), client.DeleteRangeOp(key(0), key(10)))
	if !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("WriteMany with a DeleteRangeOp: %v; want ErrInvalidArgument", err)
	}
	if _, found, err := cl.Get(ctx, []byte("wm-x")); err != nil || found {
		t.Fatalf("a refused WriteMany wrote: found=%v err=%v", found, err)
	}
	// An empty key is refused by the node for its group, clearly.
	if err := cl.WriteMany(ctx, client.PutOp(nil, []byte("x"))); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("WriteMany with an empty key: %v; want ErrInvalidArgument", err)
	}
	if err := cl.WriteMany(ctx); err != nil {
		t.Fatalf("WriteMany of nothing: %v", err)
	}
}
