package tests

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// The multiplexed client (client/mux.go) against real nodes: every test
// here goes through KV.Multiplex unless it says otherwise, and so do the
// other client tests of this package, since multiplexing is the client's
// default.

// multiplexStreams is the number of Multiplex streams node id has started
// (refused ones included).
func (c *testCluster) multiplexStreams(id uint64) float64 {
	return c.metric(id, `grpc_server_started_total{grpc_method="Multiplex",grpc_service="shale.kv.v1.KV",grpc_type="bidi_stream"}`)
}

// multiplexStreamsAll sums multiplexStreams over every node.
func (c *testCluster) multiplexStreamsAll() float64 {
	var sum float64
	for _, cn := range c.all() {
		sum += max(0, c.multiplexStreams(cn.id))
	}
	return sum
}

// dialMux dials every node with multiplexing on or off.
func (c *testCluster) dialMux(disable bool) *client.Client {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, c.endpoints(), &client.Options{RequestTimeout: 20 * time.Second, DisableMultiplexing: disable})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// TestMuxConcurrentCalls: many goroutines share one client's streams;
// each gets its own answers (compare-and-swap increments of one counter
// add up), every kind of call works, and the calls really went over
// Multiplex streams. The same client with multiplexing off opens none.
func TestMuxConcurrentCalls(t *testing.T) {
	c := newCluster(t, 3)
	unary := c.dialMux(true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := unary.Put(ctx, []byte("a-unary"), []byte("u")); err != nil {
		t.Fatal(err)
	}
	if n := c.multiplexStreamsAll(); n > 0 {
		t.Fatalf("a client with multiplexing off opened %v Multiplex streams", n)
	}

	cl := c.dialMux(false)
	const workers, incs = 16, 20
	if _, err := cl.CompareAndSwap(ctx, []byte("counter"), client.IfAbsent(), []byte("0")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < incs; {
				// Each worker also writes and reads keys of its own, so
				// answers to different callers interleave on the stream.
				k := []byte(fmt.Sprintf("w%02d-%03d", w, i))
				if err := cl.Put(ctx, k, k); err != nil {
					errs <- err
					return
				}
				if v, found, err := cl.Get(ctx, k); err != nil || !found || string(v) != string(k) {
					errs <- fmt.Errorf("Get(%s) = %q, %v, %v: another caller's answer?", k, v, found, err)
					return
				}
				cur, _, err := cl.Get(ctx, []byte("counter"))
				if err != nil {
					errs <- err
					return
				}
				var n int
				fmt.Sscan(string(cur), &n)
				res, err := cl.CompareAndSwap(ctx, []byte("counter"), client.IfValue(cur), []byte(fmt.Sprint(n+1)))
				if err != nil {
					errs <- err
					return
				}
				if res.Succeeded {
					i++
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v, _, err := cl.Get(ctx, []byte("counter"))
	if err != nil || string(v) != fmt.Sprint(workers*incs) {
		t.Fatalf("counter = %q, %v; want %d", v, err, workers*incs)
	}
	// A request too large for a frame goes unary, transparently.
	big := make([]byte, 100<<10)
	big[0] = 'x'
	if err := cl.Put(ctx, []byte("a-big"), big); err != nil {
		t.Fatal(err)
	}
	if v, _, err := cl.Get(ctx, []byte("a-big")); err != nil || len(v) != len(big) || v[0] != 'x' {
		t.Fatalf("Get(big) = %d bytes, %v", len(v), err)
	}
	// Batch, BatchGet, Scan, Delete and DeleteRange, multiplexed too.
	if err := cl.Batch(ctx, client.PutOp([]byte("b1"), []byte("1")), client.PutOp([]byte("b2"), []byte("2"))); err != nil {
		t.Fatal(err)
	}
	res, err := cl.BatchGet(ctx, [][]byte{[]byte("b1"), []byte("b2"), []byte("b3")})
	if err != nil || !res[0].Found || !res[1].Found || res[2].Found {
		t.Fatalf("BatchGet = %v, %v", res, err)
	}
	if err := cl.Delete(ctx, []byte("b1")); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteRange(ctx, []byte("w00"), []byte("w01")); err != nil {
		t.Fatal(err)
	}
	var scanned []string
	for kv, err := range cl.Scan(ctx, []byte("b"), []byte("w01"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		scanned = append(scanned, string(kv.Key))
	}
	if fmt.Sprint(scanned) != "[b2 counter]" {
		t.Fatalf("Scan after the deletes = %v, want [b2 counter]", scanned)
	}
	if n := c.multiplexStreamsAll(); n < 1 {
		t.Fatalf("the multiplexing client opened no Multiplex stream (%v)", n)
	}
}

// TestMuxLeaderKilled: the leader is SIGKILLed under a multiplexed write
// load. No acknowledged write is lost; a write reported as failed but not
// ambiguous was really not applied (so a broken stream never passes a
// write it had sent off as "not sent"); the load goes on through the new
// leader.
func TestMuxLeaderKilled(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.dialMux(false)
	var (
		mu        sync.Mutex
		acked     = map[string]string{}
		failed    []string
		ambiguous int
		lastErr   error
		stop      = make(chan struct{})
		wg        sync.WaitGroup
		next      int
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				k := fmt.Sprintf("mk-%07d", next)
				next++
				mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := cl.Put(ctx, []byte(k), []byte(k))
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					acked[k] = k
				case errors.Is(err, client.ErrAmbiguous):
					ambiguous++
					lastErr = err
				default:
					failed = append(failed, k)
					lastErr = err
				}
				mu.Unlock()
			}
		}()
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	for count() < 200 {
		time.Sleep(10 * time.Millisecond)
	}
	old, _ := c.leader(userRange, 10*time.Second)
	before := count()
	c.node(old).kill()
	// Writes go on through the new leader.
	deadline := time.Now().Add(30 * time.Second)
	for count() < before+200 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if count() < before+200 {
		t.Fatalf("only %d writes acknowledged in the 30s after the leader was killed", count()-before)
	}
	t.Logf("leader n%d killed after %d writes; %d acknowledged, %d ambiguous, %d failed (last: %v)",
		old, before, len(acked), ambiguous, len(failed), lastErr)
	checkAcked(t, cl, acked)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, k := range failed {
		if _, found, err := cl.Get(ctx, []byte(k)); err != nil || found {
			t.Errorf("write %s failed as not applied, but it was applied (found %v, %v)", k, found, err)
		}
	}
}

// TestMuxFallsBackToUnary: against nodes with multiplexing off
// (--disable-multiplex), the client's first stream per connection is
// refused and every call goes unary, without an error reaching the caller.
func TestMuxFallsBackToUnary(t *testing.T) {
	c := newCluster(t, 3, "--disable-multiplex")
	cl := c.dialMux(false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 100 {
		k := []byte(fmt.Sprintf("fb-%03d", i))
		if err := cl.Put(ctx, k, k); err != nil {
			t.Fatalf("Put %s: %v", k, err)
		}
		if v, found, err := cl.Get(ctx, k); err != nil || !found || string(v) != string(k) {
			t.Fatalf("Get %s = %q, %v, %v", k, v, found, err)
		}
	}
	// One refused stream per connection the client used, not one per call.
	if n := c.multiplexStreamsAll(); n < 1 || n > 3 {
		t.Fatalf("%v Multiplex streams were tried; want one per connection used (1..3)", n)
	}
}
