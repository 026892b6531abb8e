package tests

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// writeOutcome is what a writer knows about one key after the crash.
type writeOutcome int

const (
	acked     writeOutcome = iota // Put returned nil: must survive
	uncertain                     // Put failed mid-flight: may or may not survive
)

// TestKillNineKeepsEveryAcknowledgedWrite writes keys from several
// goroutines through the client, SIGKILLs the node in the middle of the
// stream, restarts it on the same directory and checks that every
// acknowledged write reads back exactly, that unacknowledged ones are
// either absent or intact, and that no key appears that was never written.
func TestKillNineKeepsEveryAcknowledgedWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node1")
	node := startNode(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, []string{node.grpcAddr}, &client.Options{RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const writers, maxPerWriter = 8, 5000
	const killAfter = 1500 // acknowledged writes before the kill
	var (
		mu       sync.Mutex
		outcomes = map[string]writeOutcome{}
		values   = map[string]string{}
		ackCount atomic.Int64
		killed   = make(chan struct{})
		wg       sync.WaitGroup
	)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < maxPerWriter; i++ {
				k := fmt.Sprintf("w%d/%05d", w, i)
				v := fmt.Sprintf("value-%d-%d-%d", w, i, time.Now().UnixNano())
				mu.Lock()
				values[k] = v
				mu.Unlock()
				err := c.Put(ctx, []byte(k), []byte(v))
				mu.Lock()
				if err == nil {
					outcomes[k] = acked
				} else {
					outcomes[k] = uncertain
				}
				mu.Unlock()
				if err != nil {
					select {
					case <-killed:
					default:
						t.Errorf("Put(%s) failed before the kill: %v", k, err)
					}
					// A write in flight at the kill is ambiguous or, if it
					// never left, unavailable; never a refusal.
					if !errors.Is(err, client.ErrAmbiguous) && !errors.Is(err, client.ErrUnavailable) {
						t.Errorf("Put(%s) after the kill: %v, want ambiguous or unavailable", k, err)
					}
					return
				}
				ackCount.Add(1)
			}
		}(w)
	}
	deadline := time.Now().Add(60 * time.Second)
	for ackCount.Load() < killAfter && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if ackCount.Load() < killAfter {
		t.Fatalf("only %d writes acknowledged in 60s", ackCount.Load())
	}
	close(killed)
	node.kill()
	wg.Wait()
	if t.Failed() {
		return
	}

	node = node.restart()
	var nAcked, nUncertain, nUncertainPresent int
	for k, o := range outcomes {
		v, found, err := c.Get(ctx, []byte(k))
		if err != nil {
			t.Fatalf("Get(%s) after restart: %v", k, err)
		}
		switch o {
		case acked:
			nAcked++
			if !found || string(v) != values[k] {
				t.Errorf("acknowledged write lost: %s = %q (found %v), want %q", k, v, found, values[k])
			}
		case uncertain:
			nUncertain++
			if found {
				nUncertainPresent++
				if string(v) != values[k] {
					t.Errorf("unacknowledged write %s came back damaged: %q", k, v)
				}
			}
		}
	}
	// Nothing appears that was never written.
	scanned := 0
	for kv, err := range c.Scan(ctx, nil, nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		scanned++
		if _, ok := outcomes[string(kv.Key)]; !ok {
			t.Errorf("key %q appeared that was never written", kv.Key)
		}
	}
	if scanned < nAcked || scanned > nAcked+nUncertain {
		t.Errorf("scan found %d keys; %d acknowledged, %d uncertain", scanned, nAcked, nUncertain)
	}
	t.Logf("%d acknowledged writes survived SIGKILL; %d were in flight (%d of them landed)", nAcked, nUncertain, nUncertainPresent)
	node.stop()
}
