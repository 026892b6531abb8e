package tests

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestClientVersions drives the client's versions against a real node
// split into ranges: versions of writes and reads, created versions
// across a delete, compare-and-swap on version, reads as of the timestamp
// an earlier multi-range read was served at (exactly the same answer),
// observed timestamps moving the node's versions up, and bad timestamps
// refused.
func TestClientVersions(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, []string{node.grpcAddr}, &client.Options{ScanPageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	v1, err := c.PutVersioned(ctx, []byte("a"), []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if v1.IsZero() {
		t.Skip("skipping: the node reports no versions yet (the server side of issue 19 has not landed)")
	}
	if c.Observed().Less(v1) {
		t.Fatalf("observed %v is below the version the client wrote, %v", c.Observed(), v1)
	}
	for _, k := range []string{"b", "c", "d", "e"} {
		if err := c.Put(ctx, []byte(k), []byte("1")); err != nil {
			t.Fatal(err)
		}
	}
	// Versions and created versions.
	v2, err := c.PutVersioned(ctx, []byte("a"), []byte("2"))
	if err != nil || !v1.Less(v2) {
		t.Fatalf("rewrite of a: version %v (%v), want above %v", v2, err, v1)
	}
	r, err := c.GetVersioned(ctx, []byte("a"))
	if err != nil || string(r.Value) != "2" || r.Version != v2 || r.CreateVersion != v1 {
		t.Fatalf("GetVersioned(a) = %+v, %v; want 2 at %v created %v", r, err, v2, v1)
	}
	dv, err := c.DeleteVersioned(ctx, []byte("a"))
	if err != nil || !v2.Less(dv) {
		t.Fatalf("DeleteVersioned(a) = %v, %v", dv, err)
	}
	v3, err := c.PutVersioned(ctx, []byte("a"), []byte("3"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err = c.GetVersioned(ctx, []byte("a")); err != nil || r.Version != v3 || r.CreateVersion != v3 {
		t.Fatalf("after delete and put: %+v, %v; want version and created version %v", r, err, v3)
	}
	// As of a version: the value then, or nothing.
	for _, c2 := range []struct {
		at    client.Timestamp
		value string
	}{{v1, "1"}, {v2, "2"}, {dv, ""}, {v3, "3"}, {v1.Prev(), ""}} {
		r, err := c.GetVersioned(ctx, []byte("a"), client.AtTimestamp(c2.at))
		if err != nil || string(r.Value) != c2.value || r.Found != (c2.value != "") {
			t.Errorf("GetVersioned(a) as of %v = %+v, %v; want %q", c2.at, r, err, c2.value)
		}
	}

	// Compare-and-swap on version.
	res, err := c.CompareAndSwap(ctx, []byte("a"), client.IfVersion(v2), []byte("4"))
	if err != nil || res.Succeeded || res.CurrentVersion != v3 || res.CurrentCreateVersion != v3 || string(res.Current) != "3" {
		t.Fatalf("CAS on an old version = %+v, %v; want a failure reporting %v", res, err, v3)
	}
	res, err = c.CompareAndSwap(ctx, []byte("a"), client.IfVersion(v3), []byte("4"))
	if err != nil || !res.Succeeded || !v3.Less(res.Version) {
		t.Fatalf("CAS on the current version = %+v, %v", res, err)
	}
	if r, _ := c.GetVersioned(ctx, []byte("a")); r.Version != res.Version || string(r.Value) != "4" {
		t.Fatalf("after CAS: %+v, want version %v", r, res.Version)
	}
	if _, err := c.CompareAndSwap(ctx, []byte("a"), client.IfVersion(client.Timestamp{}), []byte("5")); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("CAS on the zero version: %v, want ErrInvalidArgument", err)
	}

	// Several ranges: a scan and a BatchGet each read at one timestamp,
	// and a read as of it, after more writes, returns exactly the same.
	for _, k := range []string{"b", "c", "d"} {
		if _, _, err := c.Split(ctx, []byte(k)); err != nil {
			t.Fatalf("split at %s: %v", k, err)
		}
	}
	var scanAt client.Timestamp
	before := scanVersioned(t, c, client.ServedAt(&scanAt))
	var batchAt client.Timestamp
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e"), []byte("zz")}
	batch, err := c.BatchGet(ctx, keys, client.ServedAt(&batchAt))
	if err != nil || scanAt.IsZero() || batchAt.IsZero() {
		t.Fatalf("BatchGet: %v; served at %v, scan at %v", err, batchAt, scanAt)
	}
	for _, kv := range before {
		if scanAt.Less(kv.Version) {
			t.Fatalf("scan served at %v returned %s at version %v", scanAt, kv.Key, kv.Version)
		}
	}
	for _, k := range []string{"a", "c", "e"} {
		if err := c.Put(ctx, []byte(k), []byte("later")); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DeleteRange(ctx, []byte("b"), []byte("d")); err != nil {
		t.Fatal(err)
	}
	if after := scanVersioned(t, c, client.AtTimestamp(scanAt)); !slices.EqualFunc(before, after, sameKV) {
		t.Fatalf("scan as of %v:\n%v\nwant what the scan served at it returned:\n%v", scanAt, after, before)
	}
	var reverse []client.KeyValue
	for kv, err := range c.Scan(ctx, nil, nil, &client.ScanOptions{Reverse: true}, client.AtTimestamp(scanAt)) {
		if err != nil {
			t.Fatal(err)
		}
		reverse = append(reverse, kv)
	}
	slices.Reverse(reverse)
	if !slices.EqualFunc(before, reverse, sameKV) {
		t.Fatalf("reverse scan as of %v differs: %v", scanAt, reverse)
	}
	again, err := c.BatchGet(ctx, keys, client.AtTimestamp(batchAt))
	if err != nil || !slices.Equal(resultsOf(batch), resultsOf(again)) {
		t.Fatalf("BatchGet as of %v = %v (%v), want %v", batchAt, resultsOf(again), err, resultsOf(batch))
	}

	// observed: a client that has seen a timestamp ahead of the node's
	// clock (within the maximum offset) gets a version above it.
	ahead := client.Timestamp{WallTime: time.Now().Add(200 * time.Millisecond).UnixNano()}
	c2, err := client.Dial(ctx, []string{node.grpcAddr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.ObserveTimestamp(ahead)
	if v, err := c2.PutVersioned(ctx, []byte("e"), []byte("after")); err != nil || !ahead.Less(v) {
		t.Fatalf("write after observing %v got version %v (%v), want above it", ahead, v, err)
	}

	// Bad timestamps are refused and change nothing.
	future := client.Timestamp{WallTime: time.Now().Add(time.Hour).UnixNano()}
	if _, _, err := c.Get(ctx, []byte("a"), client.AtTimestamp(future)); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("Get an hour in the future: %v, want ErrInvalidArgument", err)
	}
	if _, _, err := c.Get(ctx, []byte("a"), client.AtTimestamp(client.Timestamp{})); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("Get at the zero timestamp: %v, want ErrInvalidArgument", err)
	}
	var scanErr error
	for _, err := range c.Scan(ctx, nil, nil, nil, client.AtTimestamp(client.Timestamp{WallTime: 5}), client.StaleRead(time.Second)) {
		scanErr = err
		break
	}
	if !errors.Is(scanErr, client.ErrInvalidArgument) {
		t.Errorf("Scan as of a timestamp and stale: %v, want ErrInvalidArgument", scanErr)
	}
}

func scanVersioned(t *testing.T, c *client.Client, opts ...client.ReadOption) []client.KeyValue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []client.KeyValue
	for kv, err := range c.Scan(ctx, nil, nil, nil, opts...) {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		out = append(out, kv)
	}
	return out
}

func sameKV(a, b client.KeyValue) bool {
	return string(a.Key) == string(b.Key) && string(a.Value) == string(b.Value) &&
		a.Version == b.Version && a.CreateVersion == b.CreateVersion
}

// resultsOf renders BatchGet results for comparison.
func resultsOf(rs []client.GetResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value) + "@" + r.Version.String() + "/" + r.CreateVersion.String()
		if !r.Found {
			out[i] = "absent"
		}
	}
	return out
}
