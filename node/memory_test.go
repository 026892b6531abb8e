package node

import (
	"context"
	"math"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shaledb/shale/api/kvpb"
)

// A write that finds the allowance of writes in flight taken waits (its
// client is slowed), proceeds once room is made, and, if none is made in
// half its remaining time, fails Unavailable with a retry delay, not
// applied.
func TestWriteAdmissionWaitsThenRefuses(t *testing.T) {
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) }) // the budget set the test process's
	tn := startNode(t, "", Config{MemoryBudgetBytes: 80 << 20})
	b := tn.n.writes
	if b.limit != 10<<20 {
		t.Fatalf("allowance %d, want an eighth of the budget, %d", b.limit, 10<<20)
	}
	ctx := context.Background()
	put := func(ctx context.Context, k string) error {
		_, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte(k), Value: make([]byte, 1<<20)})
		return err
	}
	if err := put(ctx, "first"); err != nil {
		t.Fatal(err)
	}

	// Writes in flight hold the whole allowance.
	if err := b.sem.Acquire(ctx, b.limit); err != nil {
		t.Fatal(err)
	}
	held := true
	defer func() {
		if held {
			b.sem.Release(b.limit)
		}
	}()
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := put(wctx, "refused")
	cancel()
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "memory allowance") || !strings.Contains(st.Message(), "not applied") {
		t.Fatalf("a write with the allowance taken: %v, want Unavailable naming the memory allowance", err)
	}
	var retry bool
	for _, d := range st.Details() {
		_, ok := d.(*errdetails.RetryInfo)
		retry = retry || ok
	}
	if !retry {
		t.Errorf("the refusal carries no retry delay: %v", st.Details())
	}
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Errorf("refused after %v: the write did not wait for room", took)
	}
	if g, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: []byte("refused")}); err != nil || g.GetFound() {
		t.Fatalf("the refused write was applied (found %v, err %v)", g.GetFound(), err)
	}
	if v := counterValue(b.refused); v != 1 {
		t.Errorf("refused counter %v, want 1", v)
	}

	// A write that waits goes through once room is made.
	waitsBefore := counterValue(b.waits)
	done := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		done <- put(wctx, "waited")
	}()
	for deadline := time.Now().Add(10 * time.Second); counterValue(b.waits) == waitsBefore; {
		if time.Now().After(deadline) {
			t.Fatal("the second write never waited for the allowance")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the write finished (%v) while the allowance was taken", err)
	default:
	}
	b.sem.Release(b.limit)
	held = false
	if err := <-done; err != nil {
		t.Fatalf("the waiting write, once room was made: %v", err)
	}
	if v := b.inflight.Load(); v != 0 {
		t.Errorf("%d bytes still counted in flight after every write finished", v)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
