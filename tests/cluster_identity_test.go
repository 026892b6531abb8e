package tests

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// Cluster identity (node/identity.go): two clusters started one after the
// other on the same addresses must stay two clusters. A node started on the
// other cluster's data directory, or on an empty directory after it has
// served, refuses to start and changes nothing; a client that names its
// cluster is refused by a node of another.

// clusterID asks node id for the ID of its cluster.
func (c *testCluster) clusterID(id uint64) string {
	c.t.Helper()
	_, admin, done := c.raw(id)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := admin.Status(ctx, &kvpb.StatusRequest{NodeOnly: true})
	if err != nil {
		c.t.Fatalf("status of node %d: %v", id, err)
	}
	return st.GetClusterId()
}

// restartWith starts node id again, always passing --initial-cluster as a
// deployment whose flags never change does, on a fresh process handle.
// It returns the start's error (nil once healthy).
func (c *testCluster) restartWith(id uint64) error {
	c.t.Helper()
	shale, _ := binaries(c.t)
	cn := c.node(id)
	args := []string{"--listen", cn.grpcAddr, "--http", cn.httpAddr, "--data-dir", cn.dataDir, "--log-format", "json",
		"--initial-cluster", c.initial}
	args = append(args, c.extra...)
	cn.newProc(cn.dataDir + ".log")
	return cn.proc.Start(shale, args, nil, 60*time.Second)
}

// waitStarted waits until node from's registry marks node id as started.
func (c *testCluster) waitStarted(from, id uint64) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, admin, done := c.raw(from)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := admin.Status(ctx, &kvpb.StatusRequest{})
		cancel()
		done()
		if err == nil {
			for _, m := range st.GetMembers() {
				if m.GetNodeId() == id && m.GetStarted() {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("node %d's registry never marked node %d as started", from, id)
}

func TestClusterIdentity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two 3-node clusters")
	}
	c := newCluster(t, 3)
	idA := c.clusterID(1)
	for id := uint64(2); id <= 3; id++ {
		if got := c.clusterID(id); got != idA {
			t.Fatalf("node %d is in cluster %q, node 1 in %q", id, got, idA)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.client().Put(ctx, []byte("a"), []byte("cluster A")); err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 3; id++ {
		c.stop(id)
	}
	// Keep cluster A's directories; cluster B starts on the same
	// addresses with new ones. Its members start in reverse order: the
	// others wait for the seed (node 1) to make the cluster's ID.
	for _, cn := range c.all() {
		if err := os.Rename(cn.dataDir, cn.dataDir+"-A"); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for id := uint64(3); id >= 1; id-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[id] = c.restartWith(id)
		}()
		if id > 1 {
			// Nodes 3 and 2 wait for the seed (they are not healthy until
			// it serves); give them a head start without waiting on them.
			waitLogged(t, c.node(id), "waiting for the seed")
		}
	}
	wg.Wait()
	for id := 1; id <= 3; id++ {
		if errs[id] != nil {
			t.Fatalf("cluster B, node %d: %v", id, errs[id])
		}
	}
	c.waitLeaders(1, 2)
	idB := c.clusterID(1)
	if idB == idA {
		t.Fatalf("two clusters on the same addresses share the ID %q", idA)
	}
	for id := uint64(2); id <= 3; id++ {
		if got := c.clusterID(id); got != idB {
			t.Fatalf("node %d is in cluster %q, node 1 in %q", id, got, idB)
		}
	}
	clB := c.client()
	if err := clB.Put(ctx, []byte("b"), []byte("cluster B")); err != nil {
		t.Fatal(err)
	}

	t.Run("another cluster's directory", func(t *testing.T) {
		n1 := c.node(1)
		c.stop(1)
		own := n1.dataDir
		n1.dataDir = own + "-A"
		err := c.restartWith(1)
		n1.dataDir = own
		if err == nil {
			t.Fatal("node 1 started on cluster A's data directory inside cluster B")
		}
		if !strings.Contains(err.Error(), "another cluster's directory") || !strings.Contains(err.Error(), idA) {
			t.Fatalf("refusal does not say why: %v", err)
		}
		// Cluster B lost nothing and still takes writes with node 1 out.
		if err := clB.Put(ctx, []byte("b2"), []byte("without node 1")); err != nil {
			t.Fatal(err)
		}
		if err := c.restartWith(1); err != nil {
			t.Fatalf("node 1 on its own directory: %v", err)
		}
		c.waitLeaders(1, 2)
		for key, want := range map[string]string{"b": "cluster B", "b2": "without node 1"} {
			v, found, err := clB.Get(ctx, []byte(key))
			if err != nil || !found || string(v) != want {
				t.Fatalf("get %s = %q, %v, %v; want %q", key, v, found, err, want)
			}
		}
		if _, found, err := clB.Get(ctx, []byte("a")); err != nil || found {
			t.Fatalf("cluster A's key in cluster B: found=%v err=%v", found, err)
		}
	})

	t.Run("empty directory after serving", func(t *testing.T) {
		c.waitStarted(1, 2)
		n2 := c.node(2)
		c.stop(2)
		if err := os.Rename(n2.dataDir, n2.dataDir+"-lost"); err != nil {
			t.Fatal(err)
		}
		err := c.restartWith(2)
		if err == nil {
			t.Fatal("node 2 bootstrapped again on an empty directory after it had served")
		}
		if !strings.Contains(err.Error(), "has served in this cluster before") {
			t.Fatalf("refusal does not say why: %v", err)
		}
		if err := os.RemoveAll(n2.dataDir); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(n2.dataDir+"-lost", n2.dataDir); err != nil {
			t.Fatal(err)
		}
		if err := c.restartWith(2); err != nil {
			t.Fatalf("node 2 on its own directory: %v", err)
		}
		if err := clB.Put(ctx, []byte("b3"), []byte("after")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("client naming another cluster", func(t *testing.T) {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		start := time.Now()
		_, err := client.Dial(dctx, c.endpoints(), &client.Options{ClusterID: idA})
		if err == nil {
			t.Fatal("a client of cluster A was served by cluster B")
		}
		if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), idA) || !strings.Contains(err.Error(), idB) {
			t.Fatalf("refusal = %v; want InvalidArgument naming %s and %s", err, idA, idB)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("the refusal took %v: a definite refusal should not wait out the deadline", took)
		}
		cl, err := client.Dial(dctx, c.endpoints(), &client.Options{ClusterID: idB})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, _, err := cl.Get(dctx, []byte("b")); err != nil {
			t.Fatal(err)
		}
	})
}

// waitLogged waits until node cn's log has a line containing s.
func waitLogged(t *testing.T, cn *clusterNode, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(cn.proc.Log(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("node %d never logged %q:\n%s", cn.id, s, tail(cn.proc.Log(), 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
