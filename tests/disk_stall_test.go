package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// setDiskDelay makes every engine file operation of the kinds in ops
// (e.g. "sync") on node id sleep delay first (PUT /debug/faults/disk of a
// faults build); a zero delay clears every delay.
func (c *testCluster) setDiskDelay(id uint64, ops string, delay time.Duration) error {
	cn := c.node(id)
	method, u := http.MethodDelete, "http://"+cn.httpAddr+"/debug/faults/disk"
	if delay > 0 {
		method = http.MethodPut
		u += "?" + url.Values{"ops": {ops}, "delay": {delay.String()}}.Encode()
	}
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, u, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// TestClusterDiskStalledLeaderShedsLeadership stalls the disk of the user
// range's leader: every fsync on its node hangs for far longer than the
// test, through the engine's fault-injection file layer, so the Raft log
// writer's SyncWAL hangs in the real write path. The leader keeps
// heartbeating (the log writer runs beside the processing loop), so
// nothing but its own stall detection can move the leadership: writes to
// the range must succeed again within two election timeouts (plus slack
// for a loaded machine), the stalled node must not take the leadership
// back while its disk stays stalled, and every acknowledged write is
// readable.
func TestClusterDiskStalledLeaderShedsLeadership(t *testing.T) {
	c := newFaultsCluster(t, 3)
	cl := c.grayClient()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	acked := map[string]string{}
	for i := 0; i < 20; i++ {
		k := fmt.Sprintf("before-%02d", i)
		if err := cl.Put(ctx, []byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
		acked[k] = "v"
	}
	old, _ := c.leader(userRange, 10*time.Second)
	if err := c.setDiskDelay(old, "sync", 50*time.Second); err != nil {
		t.Fatal(err)
	}
	stalled := time.Now()
	defer func() { _ = c.setDiskDelay(old, "", 0) }()

	bound := 2*electionTimeout + electionTimeout // slack for a loaded 2-core machine
	var recovered time.Duration
	var failures []error
	for i := 0; recovered == 0; i++ {
		if time.Since(stalled) > 30*time.Second {
			t.Fatalf("no write succeeded within 30s of stalling the leader n%d's disk; failures: %v", old, failures)
		}
		k := fmt.Sprintf("after-%03d", i)
		err := cl.Put(ctx, []byte(k), []byte("v"))
		if err != nil {
			failures = append(failures, err)
			if !errors.Is(err, client.ErrAmbiguous) && !errors.Is(err, client.ErrUnavailable) {
				t.Fatalf("write %s: %v", k, err)
			}
			continue
		}
		acked[k] = "v"
		recovered = time.Since(stalled)
	}
	t.Logf("writes resumed %v after stalling leader n%d's disk (bound %v); failed writes before: %v", recovered, old, bound, failures)
	if recovered > bound {
		t.Errorf("writes resumed %v after the leader's disk stalled, over the bound of %v (2 election timeouts of %v, plus slack)",
			recovered, bound, electionTimeout)
	}

	// While its disk stays stalled, the old leader must not lead the
	// range again (it may win an election between two slow writes, but
	// hands the leadership on at its next tick), and writes keep flowing.
	watch := time.Now()
	for i := 0; time.Since(watch) < 3*electionTimeout; i++ {
		if rs, err := c.rangeState(old, userRange); err == nil && rs.GetRaft().GetState() == "leader" {
			// Give the hand-off its tick before calling it a retake.
			time.Sleep(2 * clusterTick * 5)
			if rs, err := c.rangeState(old, userRange); err == nil && rs.GetRaft().GetState() == "leader" {
				t.Errorf("n%d leads range %d again while its disk is stalled", old, userRange)
				break
			}
		}
		k := fmt.Sprintf("later-%03d", i)
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		err := cl.Put(wctx, []byte(k), []byte("v"))
		wcancel()
		if err != nil {
			t.Errorf("write %s while n%d's disk stays stalled: %v", k, old, err)
			break
		}
		acked[k] = "v"
	}
	if got := c.metric(old, "shale_raft_leadership_shed_disk_stall_total"); got < 1 {
		t.Errorf("n%d's shale_raft_leadership_shed_disk_stall_total = %v, want >= 1", old, got)
	}
	if err := c.setDiskDelay(old, "", 0); err != nil {
		t.Fatal(err)
	}
	checkAcked(t, cl, acked)
}

// TestClusterDiskStalledLeaderEndsReadsWaitingToApply stalls the disk of
// the user range's leader after a write that its followers commit but it
// cannot apply (it applies only what its own log holds durably). A
// linearizable read sent to it then waits to apply that write. Once the
// node counts its disk as stalled, the read must fail (Unavailable, so
// the client goes to the next leader) rather than wait out its deadline:
// the timestamp oracle's lease check is such a read, and every write of
// the cluster that needed a timestamp waited behind it (docs/benchmarks.md,
// "Unavailability under leader faults").
func TestClusterDiskStalledLeaderEndsReadsWaitingToApply(t *testing.T) {
	// A 100 ms tick makes the stall threshold (an election timeout) 1 s:
	// the read below reaches the leader well before it.
	c := newFaultsCluster(t, 3, "--raft-tick", "100ms")
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.Put(ctx, []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	old, _ := c.leader(userRange, 10*time.Second)
	var follower uint64
	for _, cn := range c.all() {
		if cn.id != old {
			follower = cn.id
		}
	}
	rs, err := c.rangeState(follower, userRange)
	if err != nil {
		t.Fatal(err)
	}
	before := rs.GetRaft().GetAppliedIndex()
	if err := c.setDiskDelay(old, "sync", 50*time.Second); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.setDiskDelay(old, "", 0) }()
	kv, _, done := c.raw(old)
	defer done()
	// The write commits on the followers; the stalled leader cannot
	// apply it (nor answer it) until its disk or its leadership moves.
	go func() {
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		_, _ = kv.Put(wctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v2")})
	}()
	c.waitApplied(follower, userRange, before+1, 10*time.Second)

	const deadline = 10 * time.Second
	rctx, rcancel := context.WithTimeout(ctx, deadline)
	defer rcancel()
	start := time.Now()
	_, err = kv.Get(rctx, &kvpb.GetRequest{Key: []byte("k")})
	took := time.Since(start)
	t.Logf("the read on the stalled leader n%d ended after %v: %v", old, took, err)
	if took > deadline/2 {
		t.Errorf("the read on the stalled leader n%d took %v (deadline %v): it waited to apply instead of failing once the stall was noticed", old, took, deadline)
	}
	// The client's next leader serves the write's outcome.
	if _, _, err := cl.Get(ctx, []byte("k")); err != nil {
		t.Errorf("reading k after the stalled leader's read failed: %v", err)
	}
}

// TestClusterDiskLoadIsNoStall loads the disks and pauses the leader's
// process, and checks that no node calls its disk stalled
// (raft/diskstall.go, "A stalled disk, not a busy node"). Every fsync of
// the leader's node takes 200 ms more (a slow disk: the faults build's
// delay), the cluster takes a heavy write load, and another process's
// writer fsyncs 1 MiB at a time to the same file system: fsyncs are slow,
// never stalled. Then the leader's node is paused (SIGSTOP, as a starved
// or frozen machine is) for longer than the stall threshold: with its
// fsyncs that slow it has a log write in flight, which did not see its
// disk hang. The stall metrics must stay at 0, and every acknowledged
// write is readable.
func TestClusterDiskLoadIsNoStall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: loads the disk for seconds")
	}
	c := newFaultsCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader, _ := c.leader(userRange, 10*time.Second)
	if err := c.setDiskDelay(leader, "sync", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.setDiskDelay(leader, "", 0) }()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	// The other process's writer: 1 MiB written and fsynced at a time,
	// beside the nodes' data directories.
	hogErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		f, err := os.Create(filepath.Join(c.dir, "disk-hog"))
		if err != nil {
			hogErr <- err
			return
		}
		defer f.Close()
		buf := make([]byte, 1<<20)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%8 == 0 {
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					hogErr <- err
					return
				}
			}
			buf[0] = byte(i)
			if _, err := f.Write(buf); err != nil {
				hogErr <- err
				return
			}
			if err := f.Sync(); err != nil {
				hogErr <- err
				return
			}
		}
	}()
	// The write load: 16 writers of 32 KiB values.
	var mu sync.Mutex
	acked := map[string]string{}
	value := strings.Repeat("v", 32<<10)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("load-%02d-%05d", w, i)
				wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
				err := cl.Put(wctx, []byte(k), []byte(value))
				wcancel()
				if err == nil {
					mu.Lock()
					acked[k] = value
					mu.Unlock()
				}
			}
		}()
	}
	// Let the load build up, pause the leader's node with writes in
	// flight for longer than the stall threshold, and keep loading.
	waitFor := func(n int) {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			got := len(acked)
			mu.Unlock()
			if got >= n {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, cn := range c.all() {
			t.Logf("n%d: log syncs %v, disk stalls %v", cn.id, c.metric(cn.id, "shale_raft_log_syncs_total"), c.metric(cn.id, "shale_raft_disk_stalls_total"))
		}
		t.Fatalf("fewer than %d writes acknowledged in 30s", n)
	}
	waitFor(100)
	if err := c.node(leader).proc.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the fault's length, not a wait for state
	if err := c.node(leader).proc.Resume(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	waitFor(n + 200)
	close(stop)
	wg.Wait()
	select {
	case err := <-hogErr:
		t.Fatalf("the disk hog: %v", err)
	default:
	}

	for _, cn := range c.all() {
		stalls := c.metric(cn.id, "shale_raft_disk_stalls_total")
		shed := c.metric(cn.id, "shale_raft_leadership_shed_disk_stall_total")
		t.Logf("n%d: log syncs %v, disk stalls %v, leaderships shed %v", cn.id,
			c.metric(cn.id, "shale_raft_log_syncs_total"), stalls, shed)
		if stalls != 0 || shed != 0 {
			t.Errorf("n%d counted %v disk stalls and shed %v leaderships on a busy, healthy disk", cn.id, stalls, shed)
		}
	}
	checkAcked(t, cl, acked)
}
