package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// A cluster under GOMEMLIMIT flooded with large values (docs/operations.md,
// "Memory"): the leader admits only an eighth of its budget of write
// bytes at a time, so the flood's writers wait (their clients are slowed)
// instead of piling copies of their values up in the node; every node
// stays up, every failure says "not applied" or "outcome unknown" (a
// client deadline), and every acknowledged write is there.

// peakRSS is a process's peak resident set (VmHWM), in bytes.
func peakRSS(t testing.TB, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/pid/status")
	return 0
}

func TestMemoryBudgetFloodSlowsClients(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "200MiB") // inherited by the nodes
	c := newCluster(t, 3)
	leader, _ := c.leader(userRange, 10*time.Second)
	if v := c.metric(leader, "shale_write_inflight_limit_bytes"); v != 25<<20 {
		t.Fatalf("the leader's allowance for writes in flight is %v, want an eighth of GOMEMLIMIT (%d)", v, 25<<20)
	}
	cl := c.client()
	val := []byte(strings.Repeat("m", 1<<20))
	var mu sync.Mutex
	acked := map[string]bool{}
	var unavailable, ambiguous int
	var wg sync.WaitGroup
	deadline := time.Now().Add(10 * time.Second)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				k := fmt.Sprintf("mem-%02d-%04d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := cl.Put(ctx, []byte(k), val)
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					acked[k] = true
				case errors.Is(err, client.ErrUnavailable):
					unavailable++
				case errors.Is(err, client.ErrAmbiguous):
					ambiguous++
				default:
					mu.Unlock()
					t.Errorf("a write of the flood failed with %v, want success, Unavailable or an unknown outcome", err)
					return
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, cn := range c.all() {
		if !cn.running() {
			t.Fatalf("node %d died under the flood: %v\n%s", cn.id, cn.err(), tail(cn.log(), 30))
		}
		t.Logf("node %d: peak RSS %d MiB", cn.id, peakRSS(t, cn.proc.Pid())>>20)
	}
	waits := c.metric(leader, "shale_write_admission_waits_total")
	t.Logf("%d acknowledged, %d unavailable, %d outcome unknown; %v writes waited for the allowance on the leader",
		len(acked), unavailable, ambiguous, waits)
	if waits <= 0 {
		t.Errorf("no write waited for the leader's allowance: the flood was not held back")
	}
	if len(acked) == 0 {
		t.Fatal("no write of the flood succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for k := range acked {
		v, found, err := cl.Get(ctx, []byte(k))
		if err != nil || !found || len(v) != len(val) {
			t.Fatalf("acknowledged %s: found %v, %d bytes, err %v", k, found, len(v), err)
		}
	}
}
