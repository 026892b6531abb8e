package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// Sharding suites (docs/sharding.md): splits under load, client routing
// with stale caches. They run real nodes through the cluster harness.

// scanAll scans [start, end) through cl and checks that keys come
// strictly ordered (forward: ascending; reverse: descending). It returns
// the entries in ascending order.
func scanAll(t *testing.T, cl *client.Client, start, end string, reverse bool, page uint32) []client.KeyValue {
	t.Helper()
	out, err := scanChecked(cl, start, end, reverse, page)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// scanChecked is scanAll for any goroutine: it returns what failed.
func scanChecked(cl *client.Client, start, end string, reverse bool, page uint32) ([]client.KeyValue, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []client.KeyValue
	var s, e []byte
	if start != "" {
		s = []byte(start)
	}
	if end != "" {
		e = []byte(end)
	}
	for kv, err := range cl.Scan(ctx, s, e, &client.ScanOptions{Reverse: reverse, PageSize: page}) {
		if err != nil {
			return nil, fmt.Errorf("scan [%q, %q) reverse=%v: %w", start, end, reverse, err)
		}
		if n := len(out); n > 0 {
			c := bytes.Compare(out[n-1].Key, kv.Key)
			if (!reverse && c >= 0) || (reverse && c <= 0) {
				return nil, fmt.Errorf("scan reverse=%v out of order or duplicated: %q after %q", reverse, kv.Key, out[n-1].Key)
			}
		}
		out = append(out, kv)
	}
	if reverse {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out, nil
}

// scanner scans a span over and over in the background, alternating
// directions, until stopped or a scan fails (scanChecked's checks).
type scanner struct {
	done  chan struct{}
	wg    sync.WaitGroup
	scans int   // written by the scanning goroutine; read after stop
	err   error // likewise
}

func startScanner(cl *client.Client, start, end string, page uint32) *scanner {
	sc := &scanner{done: make(chan struct{})}
	sc.wg.Add(1)
	go func() {
		defer sc.wg.Done()
		for sc.err == nil {
			select {
			case <-sc.done:
				return
			default:
			}
			_, sc.err = scanChecked(cl, start, end, sc.scans%2 == 1, page)
			sc.scans++
		}
	}()
	return sc
}

// stop ends the scanning and returns the number of scans and the first
// failure.
func (sc *scanner) stop() (int, error) {
	close(sc.done)
	sc.wg.Wait()
	return sc.scans, sc.err
}

// rangeCount returns the number of ranges meta lists (meta included).
func rangeCount(t *testing.T, cl *client.Client) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := cl.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return len(rs.GetRanges())
}

// TestShardingSplitsUnderWrites: manual splits while 8 writers write and a
// scanner scans; no acknowledged key is lost, none is duplicated, every
// scan is ordered, and a final scan (both directions, small pages) holds
// exactly the keys written.
func TestShardingSplitsUnderWrites(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	w := startWriter(cl, "sp", 8, 3000, 90*time.Second)

	// A scanner checks order and completeness of the acknowledged prefix
	// while splits happen.
	sc := startScanner(cl, "sp-", "sp.", 97)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	splitAt := []int{1500, 500, 2500, 250, 1000, 2000, 2750, 100}
	for _, n := range splitAt {
		for w.count() < n/3 {
			time.Sleep(10 * time.Millisecond)
		}
		k := fmt.Sprintf("sp-%07d", n)
		l, r, err := cl.Split(ctx, []byte(k))
		if err != nil {
			t.Fatalf("split at %s: %v", k, err)
		}
		if string(l.GetEndKey()) != k || string(r.GetStartKey()) != k || r.GetRangeId() == l.GetRangeId() {
			t.Fatalf("split at %s gave %v and %v", k, l, r)
		}
	}
	acked := w.wait()
	scans, scanErr := sc.stop()
	if scanErr != nil {
		t.Fatalf("a scan during the splits: %v", scanErr)
	}
	t.Logf("%d writes acknowledged, %d ambiguous, %d failed (last: %v); %d scans during the splits",
		len(acked), w.ambiguous, w.failed, w.lastErr, scans)
	if w.failed > 0 {
		t.Fatalf("%d writes failed during splits (last: %v); splits must not surface errors", w.failed, w.lastErr)
	}
	if got, want := rangeCount(t, cl), 2+len(splitAt); got != want {
		t.Fatalf("meta lists %d ranges; want %d", got, want)
	}
	checkAcked(t, cl, acked)
	for _, reverse := range []bool{false, true} {
		all := scanAll(t, cl, "", "", reverse, 64)
		seen := map[string]bool{}
		for _, kv := range all {
			k := string(kv.Key)
			if seen[k] {
				t.Fatalf("key %s scanned twice", k)
			}
			seen[k] = true
			var n int
			if _, err := fmt.Sscanf(k, "sp-%07d", &n); err != nil || string(kv.Value) != fmt.Sprintf("v%d", n) {
				t.Fatalf("scanned %s=%s, which no writer wrote", k, kv.Value)
			}
		}
		for k := range acked {
			if !seen[k] {
				t.Fatalf("acknowledged key %s missing from a full scan (reverse=%v)", k, reverse)
			}
		}
		// Only acknowledged or ambiguous writes may appear.
		if extra := len(all) - len(acked); extra < 0 || extra > w.ambiguous {
			t.Fatalf("full scan has %d keys; %d acknowledged and %d ambiguous writes", len(all), len(acked), w.ambiguous)
		}
	}
}

// TestShardingStaleClientRecovers: a client caches the routing of every
// range, then another client splits the ranges and moves their leaders;
// the first client's reads, writes, batches and scans all succeed through
// its stale cache without an error reaching the application.
func TestShardingStaleClientRecovers(t *testing.T) {
	c := newCluster(t, 3)
	stale := c.client()
	admin := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	want := map[string]string{}
	for i := 0; i < 200; i++ {
		k, v := fmt.Sprintf("st-%04d", i), fmt.Sprintf("a%d", i)
		if err := stale.Put(ctx, []byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	for _, k := range []string{"st-0050", "st-0150"} {
		if _, _, err := admin.Split(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	// Warm the stale client's cache with the three ranges.
	if got := len(scanAll(t, stale, "st-", "st.", false, 1000)); got != 200 {
		t.Fatalf("scan found %d keys; want 200", got)
	}
	cached := stale.CachedRanges()

	// Behind its back: more splits, and leaders moved.
	for _, k := range []string{"st-0025", "st-0100", "st-0125", "st-0175"} {
		if _, _, err := admin.Split(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := admin.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs.GetRanges() {
		d := r.GetRangeDescriptor()
		if d.GetRangeId() == 1 {
			continue
		}
		from := r.GetLeaderNodeId()
		to := from%3 + 1
		if err := admin.TransferLeader(ctx, d.GetRangeId(), to); err != nil {
			t.Fatalf("moving range %d's leader from %d to %d: %v", d.GetRangeId(), from, to, err)
		}
	}

	// Every operation through the stale cache succeeds.
	for i := 0; i < 200; i += 7 {
		k := fmt.Sprintf("st-%04d", i)
		v, found, err := stale.Get(ctx, []byte(k))
		if err != nil || !found || string(v) != want[k] {
			t.Fatalf("stale client Get(%s) = %q %v %v; want %q", k, v, found, err, want[k])
		}
	}
	for i := 3; i < 200; i += 11 {
		k, v := fmt.Sprintf("st-%04d", i), fmt.Sprintf("b%d", i)
		if err := stale.Put(ctx, []byte(k), []byte(v)); err != nil {
			t.Fatalf("stale client Put(%s): %v", k, err)
		}
		want[k] = v
	}
	res, err := stale.CompareAndSwap(ctx, []byte("st-0003"), client.IfValue([]byte("b3")), []byte("c3"))
	if err != nil || !res.Succeeded {
		t.Fatalf("stale client CompareAndSwap = %+v, %v", res, err)
	}
	want["st-0003"] = "c3"
	keys := make([][]byte, 0, len(want))
	for k := range want {
		keys = append(keys, []byte(k))
	}
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	got, err := stale.BatchGet(ctx, keys)
	if err != nil {
		t.Fatalf("stale client BatchGet over 7 ranges: %v", err)
	}
	for i, r := range got {
		if !r.Found || string(r.Value) != want[string(keys[i])] {
			t.Fatalf("BatchGet %s = %q %v; want %q", keys[i], r.Value, r.Found, want[string(keys[i])])
		}
	}
	all := scanAll(t, stale, "st-", "st.", true, 13)
	if len(all) != len(want) {
		t.Fatalf("reverse scan found %d keys; want %d", len(all), len(want))
	}
	for _, kv := range all {
		if want[string(kv.Key)] != string(kv.Value) {
			t.Fatalf("scan %s = %s; want %s", kv.Key, kv.Value, want[string(kv.Key)])
		}
	}
	if stale.CachedRanges() <= cached {
		t.Fatalf("the client cached %d ranges before and %d after the splits; it should have learned the new ones", cached, stale.CachedRanges())
	}

	// A batch within one range is atomic; one spanning ranges is refused
	// with a clear error and writes nothing.
	if err := stale.Batch(ctx, client.PutOp([]byte("st-0001"), []byte("x")), client.PutOp([]byte("st-0002"), []byte("y"))); err != nil {
		t.Fatalf("batch within a range: %v", err)
	}
	err = stale.Batch(ctx, client.PutOp([]byte("st-0010"), []byte("z")), client.PutOp([]byte("st-0060"), []byte("z")))
	if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "spans more than one range") {
		t.Fatalf("batch across ranges: err = %v; want ErrInvalidArgument saying it spans ranges", err)
	}
	if v, _, err := stale.Get(ctx, []byte("st-0010")); err != nil || string(v) != want["st-0010"] {
		t.Fatalf("the refused batch wrote st-0010 = %q (%v)", v, err)
	}
}
