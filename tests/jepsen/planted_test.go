package jepsen

import (
	"context"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// plantedCluster is the setup the planted-bug tests of the session
// checkers share (lease, lock, election): a 3-node cluster of the faults
// build, rounds of workers on it, and a planted bug set or cleared on
// every node through its /debug/faults/ endpoint (node/faults_on.go).
type plantedCluster struct {
	t *testing.T
	c *cluster
}

// startPlanted starts the cluster; it skips the test in -short mode.
func startPlanted(t *testing.T) *plantedCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping a multi-process test in -short mode")
	}
	return &plantedCluster{t: t, c: startClusterBin(t, faultsBinary(t), filepath.Join(t.TempDir(), "c"), 3, false)}
}

// run runs n workers for d, each with a session of its own and a random
// source seeded with (seed, its index), and returns when all are done.
func (p *plantedCluster) run(d time.Duration, n int, seed uint64, worker func(ctx context.Context, i int, s *session, rng *rand.Rand)) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		s, err := newSession(p.c, p.t)
		if err != nil {
			p.t.Fatal(err)
		}
		defer s.close()
		wg.Add(1)
		go func() { defer wg.Done(); worker(ctx, i, s, rand.New(rand.NewPCG(seed, uint64(i)))) }()
	}
	wg.Wait()
}

// plant sets (on) or clears the planted bug named fault on every node.
func (p *plantedCluster) plant(fault string, on bool) {
	p.t.Helper()
	method := map[bool]string{true: http.MethodPut, false: http.MethodDelete}[on]
	for _, nd := range p.c.nodes(false) {
		req, _ := http.NewRequest(method, "http://"+nd.httpAddr+"/debug/faults/"+fault, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			p.t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			p.t.Fatalf("%s %s on node %d: %s", method, fault, nd.id, resp.Status)
		}
	}
}
