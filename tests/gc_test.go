package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
)

// History retention and GC on real nodes (docs/versions.md, "Retention
// window and garbage collection").

// tsLess orders wire timestamps.
func tsLess(a, b *kvpb.Timestamp) bool {
	if a.GetWallNanos() != b.GetWallNanos() {
		return a.GetWallNanos() < b.GetWallNanos()
	}
	return a.GetLogical() < b.GetLogical()
}

// TestGCCollectsHistory: keys written three times, one of them deleted,
// with a 2 s retention window. Once the GC queue has raised the range's
// threshold past the writes, every replica holds each key's newest
// version only (the deleted key not at all); a read below the threshold
// fails with FailedPrecondition and a HistoryCompacted detail; reads at
// and above it return exactly what they returned before GC, versions
// included.
func TestGCCollectsHistory(t *testing.T) {
	c := newCluster(t, 3, "--history-retention", "2s", "--history-gc-interval", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rid := uint64(keys.FirstUserRangeID)
	leader, _ := c.leader(rid, 30*time.Second)
	kv, _, done := c.raw(leader)
	defer done()
	hdr := func() *kvpb.RequestHeader { return &kvpb.RequestHeader{RangeId: rid} }

	const nkeys = 10
	var first *kvpb.Timestamp // the first write's version
	for round := 1; round <= 3; round++ {
		for i := 0; i < nkeys; i++ {
			resp, err := kv.Put(ctx, &kvpb.PutRequest{Header: hdr(), Key: []byte(fmt.Sprintf("gc-%02d", i)), Value: []byte(fmt.Sprintf("r%d", round))})
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = resp.GetVersion()
			}
		}
	}
	if _, err := kv.Delete(ctx, &kvpb.DeleteRequest{Header: hdr(), Key: []byte("gc-09")}); err != nil {
		t.Fatal(err)
	}
	// The state now, and the timestamp it was read at.
	before, err := kv.Scan(ctx, &kvpb.ScanRequest{Header: hdr(), StartKey: []byte("gc-"), EndKey: []byte("gc.")})
	if err != nil {
		t.Fatal(err)
	}
	at := before.GetHeader().GetReadTimestamp()
	if len(before.GetKvs()) != nkeys-1 || at == nil {
		t.Fatalf("scan before GC: %d keys at %v", len(before.GetKvs()), at)
	}
	// A read at the first version works while history is kept.
	if resp, err := kv.Get(ctx, &kvpb.GetRequest{Header: &kvpb.RequestHeader{RangeId: rid, ReadTimestamp: first}, Key: []byte("gc-00")}); err != nil || string(resp.GetValue()) != "r1" {
		t.Fatalf("read at the first version before GC: %v, %v", resp, err)
	}

	// GC runs on its own: wait for every replica's threshold to pass the
	// last write and its stats to show the history gone.
	t0 := time.Now()
	waitFor(t, 60*time.Second, "GC past the writes on every replica", func() bool {
		for _, cn := range c.all() {
			rs, err := c.rangeState(cn.id, rid)
			if err != nil || tsLess(rs.GetGcThreshold(), at) {
				return false
			}
			m := rs.GetMvcc()
			if m.GetVersions() != nkeys-1 || m.GetKeys() != nkeys-1 || m.GetLiveKeys() != nkeys-1 {
				return false
			}
		}
		return true
	})
	t.Logf("GC done in %v", time.Since(t0))
	rs, err := c.rangeState(leader, rid)
	if err != nil {
		t.Fatal(err)
	}
	threshold := rs.GetGcThreshold()
	if m := rs.GetMvcc(); m.GetBytes() != m.GetLiveBytes() {
		t.Fatalf("after GC the range holds %d bytes, %d of them live", m.GetBytes(), m.GetLiveBytes())
	}

	// Below the threshold: refused, with the detail.
	_, err = kv.Get(ctx, &kvpb.GetRequest{Header: &kvpb.RequestHeader{RangeId: rid, ReadTimestamp: first}, Key: []byte("gc-00")})
	st, _ := status.FromError(err)
	if st.Code() != codes.FailedPrecondition {
		t.Fatalf("read below the GC threshold: %v; want FailedPrecondition", err)
	}
	var hc *kvpb.HistoryCompacted
	for _, d := range st.Details() {
		if h, ok := d.(*kvpb.HistoryCompacted); ok {
			hc = h
		}
	}
	if hc == nil || hc.GetRangeId() != rid || !proto.Equal(hc.GetReadTimestamp(), first) || !proto.Equal(hc.GetGcThreshold(), threshold) {
		t.Fatalf("refusal %v carries detail %v; want range %d, read %v, threshold %v", err, hc, rid, first, threshold)
	}

	// At the threshold and at the timestamp read before GC: unchanged.
	for _, ts := range []*kvpb.Timestamp{threshold, at} {
		if tsLess(ts, threshold) {
			continue
		}
		after, err := kv.Scan(ctx, &kvpb.ScanRequest{Header: &kvpb.RequestHeader{RangeId: rid, ReadTimestamp: ts}, StartKey: []byte("gc-"), EndKey: []byte("gc.")})
		if err != nil {
			t.Fatalf("scan at %v after GC: %v", ts, err)
		}
		if len(after.GetKvs()) != len(before.GetKvs()) {
			t.Fatalf("scan at %v after GC: %d keys, %d before", ts, len(after.GetKvs()), len(before.GetKvs()))
		}
		for i, kv := range after.GetKvs() {
			if !proto.Equal(kv, before.GetKvs()[i]) {
				t.Fatalf("scan at %v after GC: %v, before GC %v", ts, kv, before.GetKvs()[i])
			}
		}
	}
	if v := c.metric(leader, "shale_gc_versions_collected_total"); v < 2*nkeys+1 {
		t.Fatalf("leader collected %v versions; want at least %d", v, 2*nkeys+1)
	}
}

// TestGCMergeAfterDelete: two loaded ranges are emptied by a range
// delete; they merge automatically (their live data is zero at once), and
// GC then removes the deleted history, so the merged range holds nothing.
func TestGCMergeAfterDelete(t *testing.T) {
	c := newCluster(t, 3, "--disable-placement=false", "--placement-interval", "500ms", "--merge-delay", "1s",
		"--merge-size", "65536", "--history-retention", "1s", "--history-gc-interval", "300ms")
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	val := make([]byte, 512)
	for i := 0; i < 400; i++ {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("md-%04d", i)), val); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := cl.Split(ctx, []byte("md-0200")); err != nil {
		t.Fatal(err)
	}
	// Loaded (100 KiB each, above --merge-size): they stay apart through
	// several placement passes past the merge delay. A node's range list
	// may lag the split (or a merge) it has not applied yet, so only a
	// list every node agrees on counts.
	waitFor(t, 10*time.Second, "every node's range list shows the split", func() bool {
		n, ok := agreedRangeCount(ctx, c)
		return ok && n == 3
	})
	for deadline := time.Now().Add(3 * time.Second); ; {
		if n, ok := agreedRangeCount(ctx, c); ok && n != 3 {
			t.Fatalf("loaded ranges merged: every node lists %d ranges, want 3", n)
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitFor(t, 10*time.Second, "the nodes' range lists agree", func() bool {
		n, ok := agreedRangeCount(ctx, c)
		if ok && n != 3 {
			t.Fatalf("loaded ranges merged: every node lists %d ranges, want 3", n)
		}
		return ok
	})
	if err := cl.DeleteRange(ctx, []byte("md-"), []byte("md.")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the emptied ranges merged", func() bool {
		rs, err := cl.Ranges(ctx)
		return err == nil && len(rs.GetRanges()) == 2
	})
	rid := uint64(keys.FirstUserRangeID)
	waitFor(t, 60*time.Second, "the deleted history collected on every replica", func() bool {
		for _, cn := range c.all() {
			rs, err := c.rangeState(cn.id, rid)
			if err != nil || rs.GetMvcc().GetVersions() != 0 || rs.GetMvcc().GetBytes() != 0 {
				return false
			}
		}
		return true
	})
}

// agreedRangeCount returns how many ranges the range list holds, and true,
// when every node's own list (each node answers from its replica of the
// meta range, which may lag) names the same descriptors.
func agreedRangeCount(ctx context.Context, c *testCluster) (int, bool) {
	var first *kvpb.RangesResponse
	for _, cn := range c.all() {
		_, admin, done := c.raw(cn.id)
		rs, err := admin.Ranges(ctx, &kvpb.RangesRequest{})
		done()
		if err != nil {
			return 0, false
		}
		if first == nil {
			first = rs
			continue
		}
		if len(rs.GetRanges()) != len(first.GetRanges()) {
			return 0, false
		}
		for i, r := range rs.GetRanges() {
			if !proto.Equal(r.GetRangeDescriptor(), first.GetRanges()[i].GetRangeDescriptor()) {
				return 0, false
			}
		}
	}
	return len(first.GetRanges()), first != nil
}
