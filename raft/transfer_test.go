package raft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/keys"
)

// TestLeaderTransferLeavesNoWriteAmbiguous: writes under load while the
// range's leadership moves around the nodes again and again. A write the
// old leader had appended either applies (and its proposer learns so) or
// is proven lost by a later term's entry (a definite NotLeader); none is
// reported ambiguous. Each write is a create-if-absent CAS without
// deduplication, so a write answered "not applied" that did apply shows
// up as a failed CAS finding its own value on the retry, and a lost
// write as a key missing at the end.
func TestLeaderTransferLeavesNoWriteAmbiguous(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 90*time.Second)
	rangeID := keys.FirstUserRangeID
	c.leader(rangeID)

	// The mover transfers leadership round the nodes; the writers write
	// until it has moved it wantTransfers times.
	const wantTransfers = 12
	stop := make(chan struct{})
	var transfers atomic.Int64
	var mover sync.WaitGroup
	mover.Add(1)
	go func() {
		defer mover.Done()
		defer close(stop)
		for transfers.Load() < wantTransfers && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			l := c.leader(rangeID)
			tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := l.store.TransferLeader(tctx, rangeID, l.id%3+1); err == nil {
				transfers.Add(1)
			}
			cancel()
		}
	}()

	const writers = 16
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	written := make([]int, writers)
	var retries atomic.Int64
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key, val := fmt.Sprintf("w%02d-%05d", w, i), fmt.Sprintf("v%d.%d", w, i)
				if err := casUntilDecided(ctx, c, rangeID, key, val, &retries); err != nil {
					errs <- err
					return
				}
				written[w] = i + 1
			}
		}()
	}
	wg.Wait()
	mover.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if transfers.Load() < wantTransfers {
		t.Fatalf("only %d leader transfers happened during the load", transfers.Load())
	}
	total := 0
	for _, n := range written {
		total += n
	}
	t.Logf("%d writes, %d leader transfers, %d definite refusals retried", total, transfers.Load(), retries.Load())

	// No write lost: every key is on every node, with its value.
	l := c.leader(rangeID)
	r, _ := l.store.Replica(rangeID)
	c.waitApplied(rangeID, r.AppliedIndex())
	for id := uint64(1); id <= 3; id++ {
		for w := 0; w < writers; w++ {
			for i := 0; i < written[w]; i++ {
				key, val := fmt.Sprintf("w%02d-%05d", w, i), fmt.Sprintf("v%d.%d", w, i)
				if v, ok := c.get(id, key); !ok || v != val {
					t.Fatalf("node %d: %s = %q, %v; want %q", id, key, v, ok, val)
				}
			}
		}
	}
}

// casUntilDecided creates key=val with a CAS (expect absent) through the
// range's leader, retrying the definite refusals (NotLeader, Unavailable),
// until it applies. An ambiguous answer, or a retry finding the key
// already holding val (an earlier attempt reported as not applied did
// apply), is an error.
func casUntilDecided(ctx context.Context, c *testCluster, rangeID uint64, key, val string, retries *atomic.Int64) error {
	for attempt := 0; ; attempt++ {
		l := c.leader(rangeID)
		cmd := &command.Command{Kind: command.KindCAS,
			CAS: command.CAS{Key: []byte(key), ExpectAbsent: true, NewValue: []byte(val)}}
		res, _, err := l.store.Propose(ctx, rangeID, cmd)
		switch {
		case err == nil && res.Succeeded:
			return nil
		case err == nil:
			return fmt.Errorf("%s: attempt %d found the key already written (%q, found %v): an earlier attempt said not applied but applied",
				key, attempt, res.Value, res.Found)
		case errors.Is(err, ErrAmbiguous):
			return fmt.Errorf("%s: attempt %d: %w", key, attempt, err)
		case errors.Is(err, ErrNotLeader) || errors.Is(err, ErrUnavailable):
			if ctx.Err() != nil {
				return fmt.Errorf("%s: still not applied at the deadline: %w", key, err)
			}
			retries.Add(1)
			time.Sleep(5 * time.Millisecond)
		default:
			return fmt.Errorf("%s: attempt %d: %w", key, attempt, err)
		}
	}
}
