package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// Leases on Batch and CompareAndSwap writes: a batch's leased puts and a
// swap's new value are attached and go with the revoke, the batch's
// other writes stay; an unknown lease fails the write with NotFound and
// writes nothing, not even a batch's unleased mutations, whatever a
// swap's comparison would say.
func TestClusterLeaseBatchAndCAS(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const unknown = client.LeaseID(424242)
	err := cl.Batch(ctx, client.PutOp([]byte("ba"), []byte("1"), client.WithLease(unknown)), client.PutOp([]byte("bb"), []byte("2")))
	if !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("batch with an unknown lease = %v, want ErrNotFound", err)
	}
	mustAbsent(t, cl, "ba")
	mustAbsent(t, cl, "bb")
	if _, err := cl.CompareAndSwap(ctx, []byte("ca"), client.IfAbsent(), []byte("1"), client.WithLease(unknown)); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("swap with an unknown lease = %v, want ErrNotFound", err)
	}
	mustAbsent(t, cl, "ca")
	if _, err := cl.CompareAndSwap(ctx, []byte("ca"), client.IfValue([]byte("x")), []byte("1"), client.WithLease(unknown)); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("failing swap with an unknown lease = %v, want ErrNotFound", err)
	}

	id, err := cl.Grant(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Batch(ctx, client.PutOp([]byte("ba"), []byte("1"), client.WithLease(id)), client.PutOp([]byte("bb"), []byte("2"))); err != nil {
		t.Fatalf("leased batch: %v", err)
	}
	res, err := cl.CompareAndSwap(ctx, []byte("ca"), client.IfAbsent(), []byte("1"), client.WithLease(id))
	if err != nil || !res.Succeeded {
		t.Fatalf("leased swap: %+v, %v", res, err)
	}
	// A failed comparison writes nothing, with the lease or without.
	if res, err := cl.CompareAndSwap(ctx, []byte("cb"), client.IfValue([]byte("x")), []byte("1"), client.WithLease(id)); err != nil || res.Succeeded {
		t.Fatalf("failing leased swap: %+v, %v", res, err)
	}
	mustAbsent(t, cl, "cb")
	// A swap on the batch's unleased key attaches it.
	r, err := cl.GetVersioned(ctx, []byte("bb"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := cl.CompareAndSwap(ctx, []byte("bb"), client.IfVersion(r.Version), []byte("3"), client.WithLease(id)); err != nil || !res.Succeeded {
		t.Fatalf("leased swap of bb: %+v, %v", res, err)
	}
	if err := cl.Put(ctx, []byte("plain"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	n, err := cl.Revoke(ctx, id)
	if err != nil || n != 3 {
		t.Fatalf("Revoke = %d, %v; want ba, bb and ca deleted", n, err)
	}
	for _, k := range []string{"ba", "bb", "ca"} {
		mustAbsent(t, cl, k)
	}
	if _, found, err := cl.Get(ctx, []byte("plain")); err != nil || !found {
		t.Fatalf("plain after the revoke: %v %v", found, err)
	}
	if err := cl.Batch(ctx, client.PutOp([]byte("late"), []byte("1"), client.WithLease(id))); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("batch with a revoked lease = %v, want ErrNotFound", err)
	}
	mustAbsent(t, cl, "late")
}

// TestClusterLeaseRevokeRetried: a Revoke cut short by its caller's
// timeout after the lease's end was written (its sweep waits out the
// attach window) and then retried answers like the first would have:
// the keys deleted, once they are. Only after that is the lease
// NotFound.
func TestClusterLeaseRevokeRetried(t *testing.T) {
	c := newCluster(t, 1)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := cl.Grant(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Put(ctx, []byte("r"), []byte("v"), client.WithLease(id)); err != nil {
		t.Fatal(err)
	}
	// The sweep waits until 5 s after the put's attach: a 1 s revoke
	// times out after writing the lease's end.
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	_, err = cl.Revoke(short, id)
	cancelShort()
	if err == nil {
		t.Fatal("a 1 s revoke returned before the attach window passed")
	}
	n, err := cl.Revoke(ctx, id)
	if err != nil || n != 1 {
		t.Fatalf("retried revoke = %d, %v; want 1 key deleted", n, err)
	}
	mustAbsent(t, cl, "r")
	if _, err := cl.Revoke(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("revoke of a swept lease = %v, want ErrNotFound", err)
	}
}

// TestClusterKeepAliveManyLeases: one client keeps 40 leases alive at
// once (their renewals share one stream per endpoint, which the node
// renews in batches) for more than two TTLs through a node that may not
// lead meta: every lease stays alive; once the keep-alives stop, every
// one ends.
func TestClusterKeepAliveManyLeases(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ttl = 2 * time.Second
	kctx, stop := context.WithCancel(ctx)
	var ids []client.LeaseID
	var acks []<-chan client.LeaseKeepAlive
	for range 40 {
		id, err := cl.Grant(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := cl.KeepAlive(kctx, id)
		if err != nil {
			t.Fatalf("KeepAlive(%d): %v", id, err)
		}
		ids, acks = append(ids, id), append(acks, ch)
	}
	time.Sleep(5 * time.Second) // two and a half TTLs of renewals
	for i, id := range ids {
		if _, err := cl.TimeToLive(ctx, id, false); err != nil {
			t.Fatalf("lease %d after 2.5 TTLs of keep-alives: %v", id, err)
		}
		select {
		case a, ok := <-acks[i]:
			if ok && a.Err != nil {
				t.Fatalf("lease %d: keep-alive failed: %v", id, a.Err)
			}
		default:
		}
	}
	stop()
	waitFor(t, 30*time.Second, "every lease to end", func() bool {
		ls, err := cl.Leases(ctx)
		return err == nil && len(ls) == 0
	})
}
