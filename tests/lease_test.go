package tests

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// Leases on real nodes (docs/leases.md): bad input is refused and changes
// nothing; a revoke deletes the attached keys in every range and spares
// a key overwritten without the lease; an expiry deletes them, never
// before the TTL since the last acknowledged keep-alive; a kept-alive
// lease survives the meta leader's death and restart.

// leaseRaw returns node id's Lease service alone.
func (c *testCluster) leaseRaw(id uint64) (kvpb.LeaseClient, func()) {
	c.t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+c.node(id).grpcAddr, grpc.WithTransportCredentials(c.dialCreds()))
	if err != nil {
		c.t.Fatal(err)
	}
	return kvpb.NewLeaseClient(cc), func() { cc.Close() }
}

func mustAbsent(t *testing.T, cl *client.Client, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, found, err := cl.Get(context.Background(), []byte(k)); err != nil || found {
			t.Fatalf("Get(%s) = found %v, %v; want absent", k, found, err)
		}
	}
}

func TestClusterLeaseRevokeAndBadInput(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Bad input: clear errors, nothing changes.
	raw, done := c.leaseRaw(2)
	defer done()
	for _, ttl := range []int64{0, -1, int64((25 * time.Hour).Milliseconds())} {
		if _, err := raw.Grant(ctx, &kvpb.LeaseGrantRequest{TtlMs: ttl}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("Grant(ttl %dms) = %v, want InvalidArgument", ttl, err)
		}
	}
	if _, err := cl.Grant(ctx, 0); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("client Grant(0) = %v", err)
	}
	if err := cl.Put(ctx, []byte("nolease"), []byte("v"), client.WithLease(12345)); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("put with an unknown lease = %v, want ErrNotFound", err)
	}
	mustAbsent(t, cl, "nolease")
	if ls, err := cl.Leases(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("Leases after refused grants = %v, %v", ls, err)
	}

	// Keys in several ranges.
	for _, at := range []string{"k3", "k6"} {
		if _, _, err := cl.Split(ctx, []byte(at)); err != nil {
			t.Fatalf("split at %s: %v", at, err)
		}
	}
	id, err := cl.Grant(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := 0; i < 9; i++ {
		k := fmt.Sprintf("k%d", i)
		keys = append(keys, k)
		if err := cl.Put(ctx, []byte(k), []byte("leased"), client.WithLease(id)); err != nil {
			t.Fatalf("leased put %s: %v", k, err)
		}
	}
	// k4 is overwritten without the lease: the revoke must spare it.
	if err := cl.Put(ctx, []byte("k4"), []byte("plain")); err != nil {
		t.Fatal(err)
	}
	info, err := cl.TimeToLive(ctx, id, true)
	if err != nil || info.TTL != 30*time.Second || info.Remaining <= 0 || len(info.Keys) != 9 {
		t.Fatalf("TimeToLive = %+v, %v", info, err)
	}
	if ls, err := cl.Leases(ctx); err != nil || len(ls) != 1 || ls[0].ID != id {
		t.Fatalf("Leases = %+v, %v", ls, err)
	}
	n, err := cl.Revoke(ctx, id)
	if err != nil || n != 8 {
		t.Fatalf("Revoke = %d, %v; want 8 keys deleted", n, err)
	}
	for _, k := range keys {
		if k == "k4" {
			continue
		}
		mustAbsent(t, cl, k)
	}
	if v, found, err := cl.Get(ctx, []byte("k4")); err != nil || !found || string(v) != "plain" {
		t.Fatalf("k4 after the revoke = %q %v %v; want the plain put", v, found, err)
	}
	// An ended lease: keep-alive, put, revoke and TimeToLive say so.
	if _, err := cl.KeepAliveOnce(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("keep-alive of a revoked lease = %v, want ErrNotFound", err)
	}
	if err := cl.Put(ctx, []byte("late"), []byte("v"), client.WithLease(id)); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("put with a revoked lease = %v, want ErrNotFound", err)
	}
	mustAbsent(t, cl, "late")
	if _, err := cl.Revoke(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("second revoke = %v, want ErrNotFound", err)
	}
	if _, err := cl.TimeToLive(ctx, id, false); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("TimeToLive of a revoked lease = %v, want ErrNotFound", err)
	}
}

// watchKey polls key until it is gone or until is reached, and returns
// when it was last seen present and whether it went.
func watchKey(t *testing.T, cl *client.Client, key string, until time.Time) (lastSeen time.Time, gone bool) {
	t.Helper()
	for time.Now().Before(until) {
		at := time.Now()
		_, found, err := cl.Get(context.Background(), []byte(key))
		if err != nil {
			continue // a read that failed says nothing
		}
		if !found {
			return lastSeen, true
		}
		lastSeen = at
		time.Sleep(50 * time.Millisecond)
	}
	return lastSeen, false
}

// TestClusterLeaseExpiresNotEarly: a lease with no keep-alives expires
// and its key goes, but not before its TTL since the grant was sent.
func TestClusterLeaseExpiresNotEarly(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx := context.Background()
	const ttl = 2 * time.Second
	sent := time.Now()
	id, err := cl.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Put(ctx, []byte("session"), []byte("v"), client.WithLease(id)); err != nil {
		t.Fatal(err)
	}
	// Gone within a generous bound: the TTL, the lessor's tick, the
	// attach window the sweep may wait out, and a loaded machine.
	_, gone := watchKey(t, cl, "session", sent.Add(ttl+leaseAttachWindow+30*time.Second))
	goneAt := time.Now()
	if !gone {
		t.Fatal("the key outlived its lease by more than 30s")
	}
	if goneAt.Before(sent.Add(ttl)) {
		t.Fatalf("the key went %v after the grant was sent, before the TTL of %v", goneAt.Sub(sent), ttl)
	}
	if _, err := cl.KeepAliveOnce(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("keep-alive of an expired lease = %v, want ErrNotFound", err)
	}
	if got := c.metricSum("shale_lease_expiries_total"); got < 1 {
		t.Fatalf("shale_lease_expiries_total summed over the nodes = %v, want >= 1", got)
	}
}

// leaseAttachWindow mirrors node.leaseAttachWindow (docs/leases.md).
const leaseAttachWindow = 5 * time.Second

func (c *testCluster) metricSum(name string) float64 {
	var sum float64
	for _, cn := range c.all() {
		if cn.running() {
			sum += c.metric(cn.id, name)
		}
	}
	return sum
}

// TestClusterLeaseSurvivesLeaderChangeAndRestart: a lease kept alive
// keeps its key while the meta range's leader is stopped and restarted,
// then the whole cluster restarted; once keep-alives stop, the key goes,
// not before the TTL since the last acknowledged keep-alive was sent.
func TestClusterLeaseSurvivesLeaderChangeAndRestart(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx := context.Background()
	const ttl = 3 * time.Second
	id, err := cl.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Put(ctx, []byte("member"), []byte("v"), client.WithLease(id)); err != nil {
		t.Fatal(err)
	}
	kctx, stopKeepAlive := context.WithCancel(ctx)
	defer stopKeepAlive()
	acks, err := cl.KeepAlive(kctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var lastSent time.Time
	lost := make(chan error, 1)
	go func() {
		for a := range acks {
			if a.Err != nil {
				lost <- a.Err
				return
			}
			lastSent = a.Sent
		}
		lost <- nil
	}()
	present := func(what string) {
		t.Helper()
		// Two TTLs of keep-alives: the key must stay throughout.
		until := time.Now().Add(2 * ttl)
		for time.Now().Before(until) {
			if _, found, err := cl.Get(ctx, []byte("member")); err == nil && !found {
				t.Fatalf("%s: the kept-alive lease's key went", what)
			}
			select {
			case err := <-lost:
				t.Fatalf("%s: keep-alives stopped: %v", what, err)
			default:
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	present("before any fault")
	old, _ := c.leader(1, 30*time.Second)
	c.stop(old)
	c.leader(1, 30*time.Second)
	present(fmt.Sprintf("meta leader %d stopped", old))
	c.start(old)
	present(fmt.Sprintf("node %d restarted", old))
	for _, cn := range c.all() {
		c.stop(cn.id)
	}
	for _, cn := range c.all() {
		c.start(cn.id)
	}
	c.leader(1, 30*time.Second)
	present("whole cluster restarted")

	stopKeepAlive()
	<-lost
	last := lastSent
	_, gone := watchKey(t, cl, "member", time.Now().Add(ttl+leaseAttachWindow+30*time.Second))
	goneAt := time.Now()
	if !gone {
		t.Fatal("the key outlived its lease by more than 30s after keep-alives stopped")
	}
	if goneAt.Before(last.Add(ttl)) {
		t.Fatalf("the key went %v after the last acknowledged keep-alive was sent, before the TTL of %v", goneAt.Sub(last), ttl)
	}
}
