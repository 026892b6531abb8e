package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// Range sizes (docs/sharding.md, "Size accounting") count data still in
// the memtables and leave deleted keys out, and automatic merges, which
// read them, follow: two loaded ranges do not merge, and merge once
// everything in them is deleted (after a compaction wrote the data to
// table files, so that only the deletes are in the memtable).

// rangeSizeOf is range id's size as its leader reports it.
func (c *testCluster) rangeSizeOf(rangeID uint64) (bytes, keys uint64, err error) {
	leader, _ := c.leader(rangeID, 10*time.Second)
	rs, err := c.rangeState(leader, rangeID)
	if err != nil {
		return 0, 0, err
	}
	return rs.GetApproximateBytes(), rs.GetApproximateKeys(), nil
}

func TestShardingSizesCountMemtablesAndDeletes(t *testing.T) {
	c := newCluster(t, 3, "--disable-placement=false", "--placement-interval", "500ms", "--merge-delay", "1s",
		"--merge-size", "1048576", "--split-size", "16777216")
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	const perRange = 1500
	val := strings.Repeat("x", 1024)
	for i := 0; i < 2*perRange; i++ {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("sz-%05d", i)), []byte(val)); err != nil {
			t.Fatal(err)
		}
	}
	left, right, err := cl.Split(ctx, []byte(fmt.Sprintf("sz-%05d", perRange)))
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint64{left.GetRangeId(), right.GetRangeId()}

	// Loaded, all in the memtables: each range counts its keys and bytes.
	for _, id := range ids {
		b, k, err := c.rangeSizeOf(id)
		if err != nil {
			t.Fatal(err)
		}
		if k < perRange || b < perRange*1024 {
			t.Fatalf("range %d holds %d keys of 1 KiB (in the memtable) but reports %d keys, %d bytes", id, perRange, k, b)
		}
	}
	// So the two ranges are not small and stay apart, through several
	// placement passes past the merge delay.
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		rs, err := cl.Ranges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs.GetRanges()) != 3 {
			t.Fatalf("%d ranges: the loaded ranges merged as if they were empty", len(rs.GetRanges()))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The data goes to table files on every node; then every key is
	// deleted. The ranges are empty, whatever the files still hold.
	for _, cn := range c.all() {
		_, admin, done := c.raw(cn.id)
		if _, err := admin.Compact(ctx, &kvpb.CompactRequest{}); err != nil {
			t.Fatalf("compacting node %d: %v", cn.id, err)
		}
		done()
	}
	if err := cl.DeleteRange(ctx, []byte("sz-"), []byte("sz.")); err != nil {
		t.Fatal(err)
	}
	// Within a re-measurement (30 s), the merge delay and a pass.
	waitFor(t, 60*time.Second, "the emptied ranges merged", func() bool {
		rs, err := cl.Ranges(ctx)
		return err == nil && len(rs.GetRanges()) == 2
	})
	if _, k, err := c.rangeSizeOf(left.GetRangeId()); err != nil || k != 0 {
		t.Fatalf("the merged, emptied range reports %d keys (err %v), want 0", k, err)
	}
}
