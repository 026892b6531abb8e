package node

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
	rkeys "github.com/shaledb/shale/raft/keys"
	"google.golang.org/protobuf/proto"
)

func put(t *testing.T, tn *testNode, k, v string) {
	t.Helper()
	if _, err := tn.kv.Put(ctxT(t), &kvpb.PutRequest{Key: []byte(k), Value: []byte(v)}); err != nil {
		t.Fatalf("Put(%q): %v", k, err)
	}
}

func get(t *testing.T, tn *testNode, k string) (string, bool) {
	t.Helper()
	resp, err := tn.kv.Get(ctxT(t), &kvpb.GetRequest{Key: []byte(k)})
	if err != nil {
		t.Fatalf("Get(%q): %v", k, err)
	}
	if resp.Header.GetNodeId() != tn.n.cfg.NodeID || resp.Header.GetRangeId() != rkeys.FirstUserRangeID {
		t.Fatalf("Get(%q) header = %v", k, resp.Header)
	}
	return string(resp.Value), resp.Found
}

func TestPointOperations(t *testing.T) {
	tn := startNode(t, "", Config{})
	if _, found := get(t, tn, "k"); found {
		t.Fatal("found a key never written")
	}
	put(t, tn, "k", "v1")
	put(t, tn, "empty", "")
	if v, found := get(t, tn, "k"); !found || v != "v1" {
		t.Fatalf("Get = %q, %v", v, found)
	}
	if v, found := get(t, tn, "empty"); !found || v != "" {
		t.Fatalf("Get(empty) = %q, %v", v, found)
	}
	if _, err := tn.kv.Delete(ctxT(t), &kvpb.DeleteRequest{Key: []byte("k")}); err != nil {
		t.Fatal(err)
	}
	if _, found := get(t, tn, "k"); found {
		t.Fatal("found a deleted key")
	}
	if _, err := tn.kv.Delete(ctxT(t), &kvpb.DeleteRequest{Key: []byte("never")}); err != nil {
		t.Fatalf("Delete(missing) = %v", err)
	}
}

func TestBatchAndBatchGet(t *testing.T) {
	tn := startNode(t, "", Config{})
	put(t, tn, "b", "old")
	put(t, tn, "r2", "in range")
	bresp, err := tn.kv.Batch(ctxT(t), &kvpb.BatchRequest{Mutations: []*kvpb.Mutation{
		putOp([]byte("a"), []byte("1")),
		putOp([]byte("a"), []byte("2")),
		{Op: &kvpb.Mutation_Delete{Delete: &kvpb.DeleteOp{Key: []byte("b")}}},
		{Op: &kvpb.Mutation_DeleteRange{DeleteRange: &kvpb.DeleteRangeOp{StartKey: []byte("r"), EndKey: []byte("s")}}},
		putOp([]byte("r5"), []byte("after the range delete")),
	}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tn.kv.BatchGet(ctxT(t), &kvpb.BatchGetRequest{Keys: [][]byte{[]byte("a"), []byte("b"), []byte("r2"), []byte("r5"), []byte("a")}})
	if err != nil {
		t.Fatal(err)
	}
	want := []*kvpb.GetResult{
		{Found: true, Value: []byte("2")}, {}, {}, {Found: true, Value: []byte("after the range delete")}, {Found: true, Value: []byte("2")},
	}
	for i := range want {
		if want[i].Found {
			// Every key the batch wrote has the batch's version.
			want[i].Version = bresp.GetVersion()
			want[i].CreateVersion = bresp.GetVersion()
		}
		if !proto.Equal(resp.Results[i], want[i]) {
			t.Errorf("BatchGet[%d] = %v, want %v", i, resp.Results[i], want[i])
		}
	}
	if rt, v := resp.GetHeader().GetReadTimestamp(), bresp.GetVersion(); v == nil || rt.GetWallNanos() < v.GetWallNanos() ||
		(rt.GetWallNanos() == v.GetWallNanos() && rt.GetLogical() < v.GetLogical()) {
		t.Errorf("BatchGet read at %v after a batch at version %v", rt, v)
	}
	if _, err := tn.kv.Batch(ctxT(t), &kvpb.BatchRequest{}); err != nil {
		t.Fatalf("empty Batch: %v", err)
	}
}

func TestCompareAndSwap(t *testing.T) {
	tn := startNode(t, "", Config{})
	cas := func(req *kvpb.CompareAndSwapRequest) *kvpb.CompareAndSwapResponse {
		t.Helper()
		resp, err := tn.kv.CompareAndSwap(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	k := []byte("lock")
	if r := cas(&kvpb.CompareAndSwapRequest{Key: k, ExpectAbsent: true, NewValue: []byte("me")}); !r.Succeeded || r.Found {
		t.Fatalf("create-if-absent = %v", r)
	}
	if r := cas(&kvpb.CompareAndSwapRequest{Key: k, ExpectAbsent: true, NewValue: []byte("you")}); r.Succeeded || !r.Found || string(r.CurrentValue) != "me" {
		t.Fatalf("second create-if-absent = %v", r)
	}
	if r := cas(&kvpb.CompareAndSwapRequest{Key: k, ExpectedValue: []byte("wrong"), NewValue: []byte("x")}); r.Succeeded {
		t.Fatalf("swap with a wrong expectation = %v", r)
	}
	if r := cas(&kvpb.CompareAndSwapRequest{Key: k, ExpectedValue: []byte("me"), NewValue: []byte("")}); !r.Succeeded {
		t.Fatalf("swap = %v", r)
	}
	// The key now exists with an empty value: that is not absent.
	if r := cas(&kvpb.CompareAndSwapRequest{Key: k, ExpectAbsent: true, NewValue: []byte("x")}); r.Succeeded || !r.Found {
		t.Fatalf("create-if-absent over an empty value = %v", r)
	}
	if r := cas(&kvpb.CompareAndSwapRequest{Key: k, ExpectedValue: []byte{}, Delete: true}); !r.Succeeded {
		t.Fatalf("compare-and-delete = %v", r)
	}
	if _, found := get(t, tn, "lock"); found {
		t.Fatal("compare-and-delete left the key")
	}
}

// TestCompareAndSwapIsAtomic runs read-increment-CAS loops from many
// goroutines, with blind writes to the same stripe set going on: every
// successful CAS must count exactly once.
func TestCompareAndSwapIsAtomic(t *testing.T) {
	tn := startNode(t, "", Config{})
	const workers, perWorker = 6, 25
	key := []byte("counter")
	put(t, tn, "counter", "0")
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	stop := make(chan struct{})
	go func() {
		// Blind writes to other keys keep latches busy.
		for i := 0; ; i++ {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			if _, err := tn.kv.Put(ctxT(t), &kvpb.PutRequest{Key: []byte(fmt.Sprintf("noise%d", i%64)), Value: []byte("x")}); err != nil {
				errs <- err
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := 0; done < perWorker; {
				g, err := tn.kv.Get(ctxT(t), &kvpb.GetRequest{Key: key})
				if err != nil {
					errs <- err
					return
				}
				var n int
				fmt.Sscan(string(g.Value), &n)
				r, err := tn.kv.CompareAndSwap(ctxT(t), &kvpb.CompareAndSwapRequest{
					Key: key, ExpectedValue: g.Value, NewValue: []byte(fmt.Sprint(n + 1)),
				})
				if err != nil {
					errs <- err
					return
				}
				if r.Succeeded {
					done++
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, tn, "counter"); v != fmt.Sprint(workers*perWorker) {
		t.Fatalf("counter = %s after %d successful increments", v, workers*perWorker)
	}
}

func scanAll(t *testing.T, tn *testNode, req *kvpb.ScanRequest) (keys []string, pages int) {
	t.Helper()
	req = proto.Clone(req).(*kvpb.ScanRequest)
	for {
		resp, err := tn.kv.Scan(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, kv := range resp.Kvs {
			keys = append(keys, string(kv.Key))
			if req.KeysOnly && len(kv.Value) != 0 {
				t.Fatal("keys-only scan returned a value")
			}
		}
		if !resp.More {
			if len(resp.ResumeKey) != 0 {
				t.Fatal("resume_key set without more")
			}
			return keys, pages
		}
		if req.Reverse {
			req.EndKey = resp.ResumeKey
		} else {
			req.StartKey = resp.ResumeKey
		}
	}
}

func TestScanPaging(t *testing.T) {
	tn := startNode(t, "", Config{})
	var all []string
	for i := 0; i < 57; i++ {
		k := fmt.Sprintf("k%03d", i)
		put(t, tn, k, string(bytes.Repeat([]byte("v"), 100)))
		all = append(all, k)
	}
	put(t, tn, "a-before", "x")
	put(t, tn, "z-after", "x")
	rev := slices.Clone(all)
	slices.Reverse(rev)
	cases := []struct {
		name      string
		req       *kvpb.ScanRequest
		want      []string
		wantPages int
	}{
		{"limit", &kvpb.ScanRequest{StartKey: []byte("k"), EndKey: []byte("l"), Limit: 10}, all, 6},
		{"exact pages", &kvpb.ScanRequest{StartKey: []byte("k"), EndKey: []byte("l"), Limit: 57}, all, 1},
		{"reverse", &kvpb.ScanRequest{StartKey: []byte("k"), EndKey: []byte("l"), Limit: 10, Reverse: true}, rev, 6},
		// ~104 bytes per entry: three entries fit in 350 bytes.
		{"max bytes", &kvpb.ScanRequest{StartKey: []byte("k"), EndKey: []byte("l"), MaxBytes: 350}, all, 19},
		{"one byte still progresses", &kvpb.ScanRequest{StartKey: []byte("k"), EndKey: []byte("l"), MaxBytes: 1}, all, 57},
		{"keys only", &kvpb.ScanRequest{StartKey: []byte("k"), EndKey: []byte("l"), KeysOnly: true, Limit: 20}, all, 3},
		{"unbounded", &kvpb.ScanRequest{}, append(append([]string{"a-before"}, all...), "z-after"), 1},
		{"empty span", &kvpb.ScanRequest{StartKey: []byte("k010"), EndKey: []byte("k010")}, nil, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, pages := scanAll(t, tn, c.req)
			if !slices.Equal(got, c.want) || pages != c.wantPages {
				t.Fatalf("got %d keys in %d pages, want %d in %d\n%v", len(got), pages, len(c.want), c.wantPages, got)
			}
		})
	}
}

func TestDeleteRange(t *testing.T) {
	tn := startNode(t, "", Config{})
	for _, k := range []string{"a", "b1", "b2", "c"} {
		put(t, tn, k, "v")
	}
	if _, err := tn.kv.DeleteRange(ctxT(t), &kvpb.DeleteRangeRequest{StartKey: []byte("b"), EndKey: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := scanAll(t, tn, &kvpb.ScanRequest{}); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("after DeleteRange [b, c): %v", got)
	}
	// An empty end is the end of the key space.
	if _, err := tn.kv.DeleteRange(ctxT(t), &kvpb.DeleteRangeRequest{StartKey: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := scanAll(t, tn, &kvpb.ScanRequest{}); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after DeleteRange [b, end): %v", got)
	}
}
