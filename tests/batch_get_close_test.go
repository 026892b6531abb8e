package tests

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestBatchGetInOneRangeTakesNoCloseRound: a BatchGet whose keys all lie
// in one range is served as a Get is (the linearizable barrier, then the
// range's frontier), with no timestamp closed on the range, and still
// sees every write acknowledged before it; one across two ranges closes a
// fresh timestamp on its first range so that the second, read at it,
// sees every acknowledged write too (docs/versions.md, "The frontier
// rule").
func TestBatchGetInOneRangeTakesNoCloseRound(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, []string{node.grpcAddr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.Split(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	const closes = "shale_closed_timestamps_proposed_total"
	var last client.Timestamp
	for _, k := range []string{"a", "b", "c", "z"} {
		if last, err = c.PutVersioned(ctx, []byte(k), []byte("v-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	// Warm the client's range cache and the right-hand range (a range
	// never read is closed once), then count.
	if _, err := c.BatchGet(ctx, [][]byte{[]byte("a"), []byte("z")}); err != nil {
		t.Fatal(err)
	}
	before := metricAt(t, node.httpAddr, closes)
	if before < 0 {
		t.Fatalf("the node exports no %s", closes)
	}
	for i := range 5 {
		v, err := c.PutVersioned(ctx, []byte("b"), []byte{byte('0' + i)})
		if err != nil {
			t.Fatal(err)
		}
		var at client.Timestamp
		res, err := c.BatchGet(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("b")}, client.ServedAt(&at))
		if err != nil {
			t.Fatal(err)
		}
		if string(res[1].Value) != string([]byte{byte('0' + i)}) || res[1].Version != v || res[3].Version != v || at.Less(v) {
			t.Fatalf("BatchGet after writing b at %v: b = %q at %v, served at %v", v, res[1].Value, res[1].Version, at)
		}
		if string(res[0].Value) != "v-a" || string(res[2].Value) != "v-c" {
			t.Fatalf("BatchGet: a = %q, c = %q", res[0].Value, res[2].Value)
		}
	}
	if after := metricAt(t, node.httpAddr, closes); after != before {
		t.Fatalf("five BatchGets within one range proposed %v closes, want none", after-before)
	}
	// Across two ranges: a close on the first, and the second range's
	// newest write is seen.
	res, err := c.BatchGet(ctx, [][]byte{[]byte("a"), []byte("z")})
	if err != nil || string(res[1].Value) != "v-z" || res[1].Version.Less(last) {
		t.Fatalf("BatchGet across ranges = %+v, %v", res, err)
	}
	if after := metricAt(t, node.httpAddr, closes); after <= before {
		t.Fatalf("a BatchGet across ranges proposed no close (%v before, %v after)", before, after)
	}
}
