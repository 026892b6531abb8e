package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/raft/keys"
)

// Protected timestamps on real nodes (docs/versions.md, "Protected
// timestamps").

// protectionClient dials node id's Protection service.
func (c *testCluster) protectionClient(id uint64) (kvpb.ProtectionClient, func()) {
	c.t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+c.node(id).grpcAddr, grpc.WithTransportCredentials(c.dialCreds()))
	if err != nil {
		c.t.Fatal(err)
	}
	return kvpb.NewProtectionClient(cc), func() { cc.Close() }
}

// gcThresholdAtLeast reports whether every replica of rangeID has a GC
// threshold at or above ts.
func (c *testCluster) gcThresholdAtLeast(rangeID uint64, ts client.Timestamp) bool {
	for _, cn := range c.all() {
		rs, err := c.rangeState(cn.id, rangeID)
		if err != nil || tsLess(rs.GetGcThreshold(), &kvpb.Timestamp{WallNanos: ts.WallTime, Logical: uint32(ts.Logical)}) {
			return false
		}
	}
	return true
}

// TestProtectedTimestampHoldsGC: with a 2 s retention window, a key
// written several times and protected at T keeps the version a read at T
// sees while GC passes run long past the window (the older ones go);
// bad protections are refused and create nothing; once released, GC
// collects and a read at T fails with history compacted.
func TestProtectedTimestampHoldsGC(t *testing.T) {
	c := newCluster(t, 3, "--history-retention", "2s", "--history-gc-interval", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.client()
	key := []byte("pt-key")
	var versions []client.Timestamp
	for i := 1; i <= 3; i++ {
		v, err := cl.PutVersioned(ctx, key, []byte(fmt.Sprintf("v%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	// GC collects what is older than the window as usual: v1 and v2 go.
	rid := uint64(keys.FirstUserRangeID)
	waitFor(t, 60*time.Second, "GC past the first writes on every replica", func() bool {
		return c.gcThresholdAtLeast(rid, versions[2])
	})
	p, err := cl.Protect(ctx, []byte("pt-"), []byte("pt."), client.Timestamp{}, 5*time.Minute, "test")
	if err != nil {
		t.Fatalf("protect: %v", err)
	}
	T := p.Timestamp
	if !versions[2].Less(T) {
		t.Fatalf("protected %s, not above the last write's version %s", T, versions[2])
	}
	for i := 4; i <= 5; i++ {
		if err := cl.Put(ctx, key, []byte(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatal(err)
		}
	}

	// Bad input, at a node that does not lead meta as well as one that
	// may: InvalidArgument (or FailedPrecondition for a timestamp too old),
	// nothing created.
	pc, done := c.protectionClient(2)
	defer done()
	now := time.Now()
	for _, bad := range []struct {
		name string
		req  *kvpb.ProtectRequest
		code codes.Code
	}{
		{"inverted span", &kvpb.ProtectRequest{StartKey: []byte("b"), EndKey: []byte("a"), TtlMs: 1000}, codes.InvalidArgument},
		{"empty span", &kvpb.ProtectRequest{StartKey: []byte("a"), EndKey: []byte("a"), TtlMs: 1000}, codes.InvalidArgument},
		{"ttl 0", &kvpb.ProtectRequest{StartKey: []byte("a"), EndKey: []byte("b")}, codes.InvalidArgument},
		{"negative ttl", &kvpb.ProtectRequest{StartKey: []byte("a"), EndKey: []byte("b"), TtlMs: -5}, codes.InvalidArgument},
		{"future", &kvpb.ProtectRequest{StartKey: []byte("a"), EndKey: []byte("b"), TtlMs: 1000,
			Timestamp: &kvpb.Timestamp{WallNanos: now.Add(time.Hour).UnixNano()}}, codes.InvalidArgument},
		{"too old", &kvpb.ProtectRequest{StartKey: []byte("a"), EndKey: []byte("b"), TtlMs: 1000,
			Timestamp: &kvpb.Timestamp{WallNanos: now.Add(-1500 * time.Millisecond).UnixNano()}}, codes.FailedPrecondition},
	} {
		_, err := pc.Protect(ctx, bad.req)
		if status.Code(err) != bad.code {
			t.Fatalf("%s: %v, want %v", bad.name, err, bad.code)
		}
	}
	if _, err := cl.Protect(ctx, []byte("a"), []byte("b"), client.Timestamp{}, 0, "x"); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("client protect with a TTL of 0: %v", err)
	}
	if err := cl.ReleaseProtection(ctx, 12345); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("release of an unknown protection: %v", err)
	}
	ps, err := cl.Protections(ctx)
	if err != nil || len(ps) != 1 || ps[0].ID != p.ID || ps[0].Timestamp != T || ps[0].Description != "test" {
		t.Fatalf("protections: %+v, %v; want only %+v", ps, err, p)
	}
	out, errOut, code := runCtl(t, c.node(3).grpcAddr, "protect", "list")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d ", p.ID)) || !strings.Contains(out, "test") {
		t.Fatalf("shalectl protect list: exit %d\n%s%s", code, out, errOut)
	}

	// GC runs past the window: the one version a read at T sees stays.
	waitFor(t, 60*time.Second, "the retention window passed T several GC intervals ago", func() bool {
		return time.Since(time.Unix(0, T.WallTime)) > 2*time.Second+5*300*time.Millisecond
	})
	// GC raises a threshold only by more than an interval at a time, so it
	// stops within one interval below T.
	waitFor(t, 60*time.Second, "GC up to within an interval below T on every replica", func() bool {
		return c.gcThresholdAtLeast(rid, T.Add(-300*time.Millisecond))
	})
	if c.gcThresholdAtLeast(rid, T.Next()) {
		t.Fatalf("GC threshold raised above the protected %s", T)
	}
	v, found, err := cl.Get(ctx, key, client.AtTimestamp(T))
	if err != nil || !found || string(v) != "v3" {
		t.Fatalf("read at the protected %s: %q %v %v, want v3", T, v, found, err)
	}
	if _, _, err := cl.Get(ctx, key, client.AtTimestamp(versions[0])); !errors.Is(err, client.ErrHistoryCompacted) {
		t.Fatalf("read below the protection at %s: %v, want history compacted", versions[0], err)
	}
	waitFor(t, 10*time.Second, "the meta leader's shale_protected_timestamps at 1", func() bool {
		id, _ := c.leader(keys.MetaRangeID, 10*time.Second)
		return c.metric(id, "shale_protected_timestamps") == 1 && c.metric(id, "shale_protected_timestamp_oldest_age_seconds") > 2
	})

	// Released: GC collects, a read at T fails.
	out, errOut, code = runCtl(t, c.node(1).grpcAddr, "protect", "release", fmt.Sprint(p.ID))
	if code != 0 {
		t.Fatalf("shalectl protect release: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, 60*time.Second, "a read at T refused once the protection is released", func() bool {
		_, _, err := cl.Get(ctx, key, client.AtTimestamp(T))
		return errors.Is(err, client.ErrHistoryCompacted)
	})
	if ps, err := cl.Protections(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("protections after release: %+v, %v", ps, err)
	}
}

// TestBackupProtected: with a 2 s retention window, a full backup
// throttled to run longer than the window, while writers overwrite its
// keys, succeeds and holds exactly a scan at its timestamp; kept
// protected (--keep-protected), an incremental backup on top of it taken
// long after the window succeeds; once that protection is released and GC
// has passed the base's timestamp, another incremental on it fails with
// history compacted.
func TestBackupProtected(t *testing.T) {
	shared := t.TempDir()
	c := newCluster(t, 3, "--backup-dir", shared, "--history-retention", "2s", "--history-gc-interval", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := c.client()
	for _, at := range []string{"bp-1", "bp-2"} {
		if _, _, err := cl.Split(ctx, []byte(at)); err != nil {
			t.Fatal(err)
		}
	}
	val := strings.Repeat("x", 100)
	var first client.Timestamp
	for round := 0; round < 2; round++ {
		for i := 0; i < 300; i++ {
			v, err := cl.PutVersioned(ctx, []byte(fmt.Sprintf("bp-%d-%04d", i%3, i)), []byte(fmt.Sprintf("%d-%s", round, val)))
			if err != nil {
				t.Fatal(err)
			}
			if first.IsZero() {
				first = v
			}
		}
	}
	w := startWriter(c.client(), "bp-1-live", 2, 0, time.Minute)
	defer w.finish()
	waitFor(t, 30*time.Second, "writes under way", func() bool { return w.count() > 10 })

	// About 34 KB at 5 KB/s: well past the window.
	t0 := time.Now()
	out, errOut, code := runCtl(t, c.node(1).grpcAddr, "backup", "create", "full", "--rate", "5000", "--keep-protected", "2m")
	took := time.Since(t0)
	if code != 0 {
		t.Fatalf("shalectl backup create (took %v): exit %d\n%s%s", took, code, out, errOut)
	}
	if took < 3*time.Second {
		t.Fatalf("the throttled backup took %v; the test needs it to outlast the 2 s window", took)
	}
	w.finish()
	full, err := readManifestFile(shared, "full")
	if err != nil {
		t.Fatal(err)
	}
	if full.Protection == 0 || !strings.Contains(out, fmt.Sprintf("protection %d", full.Protection)) {
		t.Fatalf("manifest protection %d, output %q: want the kept protection named", full.Protection, out)
	}
	base := full.ReadTimestamp.Timestamp()
	if want := scanAt(t, cl, base); full.Entries != uint64(len(want)) {
		t.Fatalf("the backup holds %d entries; the scan at its timestamp %d", full.Entries, len(want))
	}
	ps, err := cl.Protections(ctx)
	if err != nil || len(ps) != 1 || ps[0].ID != full.Protection || ps[0].Timestamp != base || time.Until(ps[0].Expiry) < time.Minute {
		t.Fatalf("protections after the backup: %+v, %v; want only %d at %s for about 2m", ps, err, full.Protection, base)
	}

	for i := 0; i < 300; i += 7 {
		if err := cl.Delete(ctx, []byte(fmt.Sprintf("bp-%d-%04d", i%3, i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < 300; i += 5 {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("bp-%d-%04d", i%3, i)), []byte("2-"+val)); err != nil {
			t.Fatal(err)
		}
	}
	// GC has run past the first writes, and the base is older than the
	// window by several GC intervals.
	waitFor(t, 60*time.Second, "GC past the first writes", func() bool {
		return c.gcThresholdAtLeast(keys.FirstUserRangeID, first.Next())
	})
	waitFor(t, 60*time.Second, "the base older than the window", func() bool {
		return time.Since(time.Unix(0, base.WallTime)) > 2*time.Second+5*300*time.Millisecond
	})
	out, errOut, code = runCtl(t, c.node(2).grpcAddr, "backup", "create", "incr", "--base", "full")
	if code != 0 {
		t.Fatalf("incremental on a protected base older than the window: exit %d\n%s%s", code, out, errOut)
	}
	incr, err := readManifestFile(shared, "incr")
	if err != nil {
		t.Fatal(err)
	}
	if incr.Since == nil || incr.Since.Timestamp() != base || incr.Entries == 0 || incr.Protection != 0 {
		t.Fatalf("incremental: since %v (base %s), %d entries, protection %d", incr.Since, base, incr.Entries, incr.Protection)
	}
	// The incremental's own protection was released when it ended.
	if ps, err := cl.Protections(ctx); err != nil || len(ps) != 1 {
		t.Fatalf("protections after the incremental: %+v, %v; want the base's only", ps, err)
	}

	// Without the protection the base's history goes.
	if err := cl.ReleaseProtection(ctx, full.Protection); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "reads at the base refused once released", func() bool {
		_, _, err := cl.Get(ctx, []byte("bp-0-0000"), client.AtTimestamp(base))
		return errors.Is(err, client.ErrHistoryCompacted)
	})
	out, errOut, code = runCtl(t, c.node(3).grpcAddr, "backup", "create", "incr2", "--base", "full")
	if code == 0 || !strings.Contains(out+errOut, "history compacted") {
		t.Fatalf("incremental on an unprotected base older than the window: exit %d, want a history compacted failure\n%s%s", code, out, errOut)
	}
}
