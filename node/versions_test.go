package node

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// End-to-end tests of versions through a real node's gRPC service
// (docs/versions.md, docs/wire-protocol.md).

func tsOf(p *kvpb.Timestamp) hlc.Timestamp {
	return hlc.Timestamp{WallTime: p.GetWallNanos(), Logical: int32(p.GetLogical())}
}

func statusDetail[T proto.Message](err error) (T, bool) {
	var zero T
	for _, d := range status.Convert(err).Details() {
		if m, ok := d.(T); ok {
			return m, true
		}
	}
	return zero, false
}

// TestVersionsOnTheWire: writes answer their version, reads their version
// and create_version and the timestamp they were served at, and a read as
// of an earlier timestamp sees exactly the state at it, however many
// writes follow.
func TestVersionsOnTheWire(t *testing.T) {
	tn := startNode(t, "", Config{})
	ctx := ctxT(t)
	p1, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v1")})
	if err != nil {
		t.Fatal(err)
	}
	v1 := tsOf(p1.GetVersion())
	if v1.IsZero() || tsOf(p1.GetHeader().GetNow()).Less(v1) {
		t.Fatalf("Put: version %s, now %s", v1, tsOf(p1.GetHeader().GetNow()))
	}
	p2, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v2")})
	if err != nil {
		t.Fatal(err)
	}
	v2 := tsOf(p2.GetVersion())
	if !v1.Less(v2) {
		t.Fatalf("second Put at %s, not above %s", v2, v1)
	}
	g, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	if string(g.GetValue()) != "v2" || tsOf(g.GetVersion()) != v2 || tsOf(g.GetCreateVersion()) != v1 ||
		tsOf(g.GetHeader().GetReadTimestamp()).Less(v2) {
		t.Fatalf("Get = %v", g)
	}
	// As of v1: the first value, then again after more writes and a delete.
	asOf := func() {
		t.Helper()
		g, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k"), Header: &kvpb.RequestHeader{ReadTimestamp: p1.GetVersion()}})
		if err != nil || string(g.GetValue()) != "v1" || tsOf(g.GetVersion()) != v1 || !proto.Equal(g.GetHeader().GetReadTimestamp(), p1.GetVersion()) {
			t.Fatalf("Get as of %s = %v, %v", v1, g, err)
		}
		sc, err := tn.kv.Scan(ctx, &kvpb.ScanRequest{Header: &kvpb.RequestHeader{ReadTimestamp: p1.GetVersion()}})
		if err != nil || len(sc.GetKvs()) != 1 || string(sc.GetKvs()[0].GetValue()) != "v1" {
			t.Fatalf("Scan as of %s = %v, %v", v1, sc, err)
		}
	}
	asOf()
	if _, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("j"), Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	d, err := tn.kv.Delete(ctx, &kvpb.DeleteRequest{Key: []byte("k")})
	if err != nil || d.GetVersion() == nil {
		t.Fatalf("Delete = %v, %v", d, err)
	}
	asOf()
	g, err = tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k")})
	if err != nil || g.GetFound() {
		t.Fatalf("Get after the delete = %v, %v", g, err)
	}
	// BatchGet at v2: k's second value, j not yet written.
	bg, err := tn.kv.BatchGet(ctx, &kvpb.BatchGetRequest{Keys: [][]byte{[]byte("k"), []byte("j")},
		Header: &kvpb.RequestHeader{ReadTimestamp: p2.GetVersion()}})
	if err != nil || string(bg.GetResults()[0].GetValue()) != "v2" || bg.GetResults()[1].GetFound() {
		t.Fatalf("BatchGet as of %s = %v, %v", v2, bg, err)
	}
}

// TestReadAboveTheFrontierCloses: a read at a timestamp the range has not
// reached is served after the leader closes it, and a write that follows
// lands above it; a read beyond the clock's bound is refused.
func TestReadAboveTheFrontierCloses(t *testing.T) {
	tn := startNode(t, "", Config{})
	ctx := ctxT(t)
	p, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	at := tsOf(p.GetVersion()).Add(100 * time.Millisecond)
	atp := &kvpb.Timestamp{WallNanos: at.WallTime, Logical: uint32(at.Logical)}
	g, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k"), Header: &kvpb.RequestHeader{ReadTimestamp: atp}})
	if err != nil || string(g.GetValue()) != "v" || !proto.Equal(g.GetHeader().GetReadTimestamp(), atp) {
		t.Fatalf("Get at %s = %v, %v", at, g, err)
	}
	p2, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("w")})
	if err != nil {
		t.Fatal(err)
	}
	if v := tsOf(p2.GetVersion()); !at.Less(v) {
		t.Fatalf("a write after a read at %s applied at %s", at, v)
	}
	// Still v at the closed timestamp.
	g, err = tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k"), Header: &kvpb.RequestHeader{ReadTimestamp: atp}})
	if err != nil || string(g.GetValue()) != "v" {
		t.Fatalf("Get at %s after a later write = %v, %v", at, g, err)
	}
	if n := testutilCounter(t, tn, "shale_closed_timestamps_proposed_total"); n < 1 {
		t.Fatalf("shale_closed_timestamps_proposed_total = %v", n)
	}
	// Beyond the clock plus the maximum offset: refused, nothing closed.
	future := time.Now().Add(time.Hour).UnixNano()
	_, err = tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k"), Header: &kvpb.RequestHeader{ReadTimestamp: &kvpb.Timestamp{WallNanos: future}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "future timestamp") {
		t.Fatalf("Get an hour ahead = %v, want InvalidArgument (future timestamp)", err)
	}
	if _, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k"), Header: &kvpb.RequestHeader{ReadTimestamp: &kvpb.Timestamp{WallNanos: -5}}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Get at a negative timestamp = %v, want InvalidArgument", err)
	}
}

// testutilCounter reads a counter from the node's registry.
func testutilCounter(t *testing.T, tn *testNode, name string) float64 {
	t.Helper()
	mfs, err := tn.n.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestObservedMovesTheClock: a request's observed timestamp moves the
// node's clock (the next write is above it); one beyond the maximum clock
// offset is refused with ClockOffset and changes nothing.
func TestObservedMovesTheClock(t *testing.T) {
	tn := startNode(t, "", Config{Clock: ClockOptions{MaxOffset: 2 * time.Second}})
	ctx := ctxT(t)
	ahead := hlc.Timestamp{WallTime: time.Now().Add(time.Second).UnixNano(), Logical: 7}
	p, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v"),
		Header: &kvpb.RequestHeader{Observed: &kvpb.Timestamp{WallNanos: ahead.WallTime, Logical: 7}}})
	if err != nil {
		t.Fatal(err)
	}
	if v := tsOf(p.GetVersion()); !ahead.Less(v) || tsOf(p.GetHeader().GetNow()).Less(v) {
		t.Fatalf("Put after observing %s: version %s, now %s", ahead, v, tsOf(p.GetHeader().GetNow()))
	}
	far := time.Now().Add(time.Minute).UnixNano()
	_, err = tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("no"),
		Header: &kvpb.RequestHeader{Observed: &kvpb.Timestamp{WallNanos: far}}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Put observing a minute ahead = %v, want Unavailable", err)
	}
	co, ok := statusDetail[*kvpb.ClockOffset](err)
	if !ok || co.GetMaxOffsetNanos() != int64(2*time.Second) || co.GetOffsetNanos() < int64(50*time.Second) {
		t.Fatalf("ClockOffset detail = %v (%v)", co, ok)
	}
	if v, _ := get(t, tn, "k"); v != "v" {
		t.Fatalf("the refused Put applied: k = %q", v)
	}
	if n := testutilCounter(t, tn, "shale_clock_offset_refusals_total"); n != 1 {
		t.Fatalf("shale_clock_offset_refusals_total = %v", n)
	}
}

// TestCompareAndSwapOnVersionOnTheWire: CompareAndSwap with
// expected_version swaps only on the key's current version and reports
// the current version and creation.
func TestCompareAndSwapOnVersionOnTheWire(t *testing.T) {
	tn := startNode(t, "", Config{})
	ctx := ctxT(t)
	p1, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v1")})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v2")})
	if err != nil {
		t.Fatal(err)
	}
	r, err := tn.kv.CompareAndSwap(ctx, &kvpb.CompareAndSwapRequest{Key: []byte("k"), ExpectedVersion: p1.GetVersion(), NewValue: []byte("x")})
	if err != nil || r.GetSucceeded() || !proto.Equal(r.GetCurrentVersion(), p2.GetVersion()) ||
		!proto.Equal(r.GetCurrentCreateVersion(), p1.GetVersion()) || r.GetVersion() != nil || string(r.GetCurrentValue()) != "v2" {
		t.Fatalf("CAS on a stale version = %v, %v", r, err)
	}
	r, err = tn.kv.CompareAndSwap(ctx, &kvpb.CompareAndSwapRequest{Key: []byte("k"), ExpectedVersion: p2.GetVersion(), NewValue: []byte("v3")})
	if err != nil || !r.GetSucceeded() || !tsOf(p2.GetVersion()).Less(tsOf(r.GetVersion())) {
		t.Fatalf("CAS on the current version = %v, %v", r, err)
	}
	if v, _ := get(t, tn, "k"); v != "v3" {
		t.Fatalf("k = %q after the swap", v)
	}
	_, err = tn.kv.CompareAndSwap(ctx, &kvpb.CompareAndSwapRequest{Key: []byte("k"), ExpectedVersion: &kvpb.Timestamp{WallNanos: 1, Logical: 1 << 31}, NewValue: []byte("x")})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("CAS with a malformed expected_version = %v", err)
	}
}

// TestStoreOfTheOldFormatIsRefused: a data directory written before
// versions (store format 1) is refused at open with an error naming the
// formats, and nothing on disk changes.
func TestStoreOfTheOldFormatIsRefused(t *testing.T) {
	dir := t.TempDir()
	engine := filepath.Join(dir, "engine")
	db, err := storage.Open(engine, nil)
	if err != nil {
		t.Fatal(err)
	}
	oldIdent := []byte{1, 1, 1, 'c'} // format 1: node 1 of cluster "c"
	b := storage.NewBatch(64)
	b.Put(keys.StoreIdentKey, oldIdent)
	b.Put([]byte("\x03plainkey"), []byte("plain value"))
	if err := db.Write(b, storage.WriteOptions{Sync: true}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if !errors.Is(err, keys.ErrStoreFormat) || !strings.Contains(err.Error(), "format 1") || !strings.Contains(err.Error(), "format 2") {
		t.Fatalf("New on a format 1 store = %v, want ErrStoreFormat naming formats 1 and 2", err)
	}
	db, err = storage.Open(engine, &storage.Options{ErrorIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.Get(keys.StoreIdentKey); err != nil || !bytes.Equal(v, oldIdent) {
		t.Fatalf("the identity after the refusal: %x, %v", v, err)
	}
	if v, err := db.Get([]byte("\x03plainkey")); err != nil || string(v) != "plain value" {
		t.Fatalf("the old data after the refusal: %q, %v", v, err)
	}
}

// TestReadAcrossRangesSeesEveryAcknowledgedWrite: the first part of a read
// across ranges (a BatchGet group, a Scan that goes on past its range) is
// served at a timestamp from the node's source, not at its range's
// frontier, so the later parts, read at the answer's timestamp, see every
// write acknowledged before the read began, however idle the first range.
func TestReadAcrossRangesSeesEveryAcknowledgedWrite(t *testing.T) {
	tn := startNode(t, "", Config{})
	ctx := ctxT(t)
	if _, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("a"), Value: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.admin.Split(ctx, &kvpb.SplitRequest{SplitKey: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	// Range [m, ...) gets writes; range [..., m) stays idle at its
	// frontier.
	p, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("z"), Value: []byte("new")})
	if err != nil {
		t.Fatal(err)
	}
	bg, err := tn.kv.BatchGet(ctx, &kvpb.BatchGetRequest{Keys: [][]byte{[]byte("a")}})
	if err != nil {
		t.Fatal(err)
	}
	at := bg.GetHeader().GetReadTimestamp()
	if tsOf(at).Less(tsOf(p.GetVersion())) {
		t.Fatalf("BatchGet of the idle range served at %s, below the acknowledged write at %s", tsOf(at), tsOf(p.GetVersion()))
	}
	bg, err = tn.kv.BatchGet(ctx, &kvpb.BatchGetRequest{Keys: [][]byte{[]byte("z")}, Header: &kvpb.RequestHeader{ReadTimestamp: at}})
	if err != nil || !bg.GetResults()[0].GetFound() || string(bg.GetResults()[0].GetValue()) != "new" {
		t.Fatalf("second group at %s = %v, %v", tsOf(at), bg, err)
	}
	// A Scan from the idle range on past it: likewise.
	sc, err := tn.kv.Scan(ctx, &kvpb.ScanRequest{StartKey: []byte("a")})
	if err != nil || !sc.GetMore() || string(sc.GetResumeKey()) != "m" {
		t.Fatalf("Scan of the first range = %v, %v", sc, err)
	}
	if at := sc.GetHeader().GetReadTimestamp(); tsOf(at).Less(tsOf(p.GetVersion())) {
		t.Fatalf("a Scan going on past its range served at %s, below the acknowledged write at %s", tsOf(at), tsOf(p.GetVersion()))
	}
	// A Get of the idle range needs no close: served at its frontier.
	before := testutilCounter(t, tn, "shale_closed_timestamps_proposed_total")
	g, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("a")})
	if err != nil || string(g.GetValue()) != "old" {
		t.Fatalf("Get = %v, %v", g, err)
	}
	if after := testutilCounter(t, tn, "shale_closed_timestamps_proposed_total"); after != before {
		t.Fatalf("a Get proposed %v closes", after-before)
	}
}

// TestStaleReadIsAnUnboundedFollowerRead: the old STALE consistency is
// served through the bounded-stale path with no bound (docs/versions.md,
// "Follower reads"): at the replica's frontier, named in the answer, and
// counted as a follower read.
func TestStaleReadIsAnUnboundedFollowerRead(t *testing.T) {
	tn := startNode(t, "", Config{})
	ctx := ctxT(t)
	p, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	before := testutilCounter(t, tn, "shale_follower_reads_total")
	stale := &kvpb.RequestHeader{ReadConsistency: kvpb.ReadConsistency_READ_CONSISTENCY_STALE}
	g, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k"), Header: stale})
	if err != nil || string(g.GetValue()) != "v" {
		t.Fatalf("STALE Get = %v, %v", g, err)
	}
	if served := tsOf(g.GetHeader().GetReadTimestamp()); served.Less(tsOf(p.GetVersion())) {
		t.Fatalf("STALE Get served at %s, below the write's version %s on the only replica", served, tsOf(p.GetVersion()))
	}
	if after := testutilCounter(t, tn, "shale_follower_reads_total"); after != before+1 {
		t.Fatalf("shale_follower_reads_total went from %v to %v, want one more", before, after)
	}
}

// TestBoundedStaleReadsKeepTheFrontierWithinHalfTheBound: bounded-staleness
// reads of a range that takes no writes are all served at its frontier
// (none waits on a close, so none would have sent a follower's client to
// the leader), the leader closing only when the frontier passes half the
// bound: a few closes over several bounds' time, not one per
// freshInterval.
func TestBoundedStaleReadsKeepTheFrontierWithinHalfTheBound(t *testing.T) {
	tn := startNode(t, "", Config{})
	ctx := ctxT(t)
	if _, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	const bound = 2 * time.Second
	h := &kvpb.RequestHeader{ReadConsistency: kvpb.ReadConsistency_READ_CONSISTENCY_BOUNDED_STALE,
		MaxStalenessUs: bound.Microseconds()}
	reads0 := testutilCounter(t, tn, "shale_follower_reads_total")
	closes0 := testutilCounter(t, tn, "shale_closed_timestamps_proposed_total")
	reads := 0
	for end := time.Now().Add(2 * bound); time.Now().Before(end); reads++ {
		g, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k"), Header: h})
		if err != nil || string(g.GetValue()) != "v" {
			t.Fatalf("bounded-staleness Get = %v, %v", g, err)
		}
		time.Sleep(10 * time.Millisecond) // a steady reader, not a busy loop
	}
	if served := testutilCounter(t, tn, "shale_follower_reads_total") - reads0; int(served) != reads {
		t.Errorf("%d of %d reads served at the frontier: the others waited on a close (a follower would have refused them)", int(served), reads)
	}
	// 2 bounds at one close per half bound or so: 4, and a margin; one
	// per freshInterval would be 20.
	if closes := testutilCounter(t, tn, "shale_closed_timestamps_proposed_total") - closes0; closes > 8 {
		t.Errorf("%v closes over %v of reads with a %v bound, want about one per %v", closes, 2*bound, bound, bound/2)
	}
}
