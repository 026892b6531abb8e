package tests

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/tests/internal/clusterharness"
)

// The cluster tests run real shale processes on loopback. Every node gets
// its own 127.0.0.x address (and dials its peers from it), so that a test
// can cut one node off with iptables without touching the others.
//
// Timings are the production ones scaled down by two (50 ms ticks, an
// election after 10-20 ticks), so elections take about a second.

// clusterTick is the --raft-tick of the cluster tests.
const clusterTick = 50 * time.Millisecond

// electionTimeout is the longest randomized election timeout.
const electionTimeout = 20 * clusterTick

type clusterNode struct {
	id       uint64
	ip       string
	grpcAddr string
	httpAddr string
	// grpcPort and httpPort hold the node's addresses for the whole test;
	// every start inherits listeners on them.
	grpcPort, httpPort *clusterharness.Port
	dataDir            string
	proc               *clusterharness.Proc // the process: start, signals, log
}

type testCluster struct {
	t       testing.TB
	dir     string
	extra   []string // flags for every node
	mu      sync.Mutex
	nodes   map[uint64]*clusterNode
	initial string
	// sec, when set, is how the harness reaches a TLS cluster (an admin's
	// credentials); nil dials plaintext.
	sec *clusterCreds
	// bin, when set, is the shale binary to run (default: binaries').
	bin string
}

// clusterCreds are the credentials the harness dials a TLS cluster with.
type clusterCreds struct {
	tls *tls.Config // trusts the cluster CA, presents an admin certificate; nil: plaintext
	// nodeArgs, when set, are flags of node id alone (its own
	// certificate).
	nodeArgs func(id uint64) []string
}

func (c *testCluster) dialCreds() credentials.TransportCredentials {
	if c.sec == nil || c.sec.tls == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(c.sec.tls)
}

// ipBase spreads the tests' nodes over 127.0.0.0/8 away from the usual
// 127.0.0.1.
const ipBase = 100

// testNet is the /24 the harness's nodes bind in: 127.0.0 unless
// SHALE_TEST_NET names another (say 127.0.5), so that manual runs on a
// shared machine, and the iptables partitions of their faults, stay off
// each other's addresses.
func testNet() string {
	if v := os.Getenv("SHALE_TEST_NET"); v != "" {
		return v
	}
	return "127.0.0"
}

// newCluster starts n nodes bootstrapped together (IDs 1..n), with extra
// flags for every node, and waits until every range has a leader.
func newCluster(t testing.TB, n int, extra ...string) *testCluster {
	t.Helper()
	return newClusterWith(t, n, nil, extra...)
}

// newClusterWith is newCluster for a cluster the harness reaches with sec
// (nil: plaintext).
func newClusterWith(t testing.TB, n int, sec *clusterCreds, extra ...string) *testCluster {
	t.Helper()
	return newClusterPrepared(t, n, sec, nil, extra...)
}

// newClusterPrepared is newClusterWith calling prepare (if not nil) on
// each node before its first start (e.g. to mount a file system on its
// data directory).
func newClusterPrepared(t testing.TB, n int, sec *clusterCreds, prepare func(*clusterNode), extra ...string) *testCluster {
	t.Helper()
	return newClusterBin(t, n, "", sec, prepare, extra...)
}

// newFaultsCluster is newCluster running the `faults` build of shale
// (faultsBinary), whose nodes can be given a slow disk (setDiskDelay).
func newFaultsCluster(t testing.TB, n int, extra ...string) *testCluster {
	t.Helper()
	return newClusterBin(t, n, faultsBinary(t), nil, nil, extra...)
}

// newClusterBin is newClusterPrepared running the shale binary bin (""
// for the default one).
func newClusterBin(t testing.TB, n int, bin string, sec *clusterCreds, prepare func(*clusterNode), extra ...string) *testCluster {
	t.Helper()
	binaries(t) // build before starting any clock
	c := &testCluster{t: t, dir: t.TempDir(), nodes: map[uint64]*clusterNode{}, bin: bin,
		// Automatic splits and placement stay off unless a test turns
		// them on (a later flag wins): the replication tests place
		// replicas themselves.
		extra: append([]string{"--raft-tick", clusterTick.String(), "--disable-auto-split", "--disable-placement"}, extra...), sec: sec}
	var members []string
	for id := uint64(1); id <= uint64(n); id++ {
		cn := c.newNode(id)
		members = append(members, fmt.Sprintf("%d=%s", id, cn.grpcAddr))
		if prepare != nil {
			prepare(cn)
		}
	}
	c.initial = strings.Join(members, ",")
	for id := uint64(1); id <= uint64(n); id++ {
		c.start(id, "--initial-cluster", c.initial)
	}
	t.Cleanup(func() {
		for _, cn := range c.all() {
			cn.kill()
		}
		if t.Failed() {
			for _, cn := range c.all() {
				t.Logf("---- log of node %d (last 60 lines) ----\n%s", cn.id, tail(cn.log(), 60))
			}
		}
	})
	c.waitLeaders(1, 2)
	return c
}

// newNode allocates node id's address and directory.
func (c *testCluster) newNode(id uint64) *clusterNode {
	c.t.Helper()
	ip := fmt.Sprintf("%s.%d", testNet(), ipBase+id)
	cn := &clusterNode{id: id, ip: ip, grpcPort: reservePort(c.t, ip), httpPort: reservePort(c.t, ip),
		dataDir: filepath.Join(c.dir, fmt.Sprint("node", id)),
	}
	cn.grpcAddr, cn.httpAddr = cn.grpcPort.Addr(), cn.httpPort.Addr()
	cn.newProc(filepath.Join(c.dir, fmt.Sprintf("node%d.log", id)))
	c.mu.Lock()
	c.nodes[id] = cn
	c.mu.Unlock()
	return cn
}

// newProc gives the node a new process handle logging to logPath, whose
// starts inherit listeners on the node's ports.
func (cn *clusterNode) newProc(logPath string) {
	cn.proc = clusterharness.NewProc(cn.httpAddr, logPath)
	cn.proc.Inherit(clusterharness.Socket{Flag: "--listen-fd", Port: cn.grpcPort},
		clusterharness.Socket{Flag: "--http-fd", Port: cn.httpPort})
}

// reservePort holds a port on ip until the test ends (a node's address:
// see clusterharness.Port).
func reservePort(t testing.TB, ip string) *clusterharness.Port {
	t.Helper()
	port, err := clusterharness.ReservePort(ip)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { port.Close() })
	return port
}

// reserveAddr is reservePort's host:port.
func reserveAddr(t testing.TB, ip string) string {
	t.Helper()
	return reservePort(t, ip).Addr()
}

func (c *testCluster) node(id uint64) *clusterNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

func (c *testCluster) all() []*clusterNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*clusterNode, 0, len(c.nodes))
	for id := uint64(1); len(out) < len(c.nodes); id++ {
		if cn := c.nodes[id]; cn != nil {
			out = append(out, cn)
		}
	}
	return out
}

// start starts node id's process (args are added on its first start only,
// as on a real deployment) and waits until it reports healthy.
func (c *testCluster) start(id uint64, firstArgs ...string) {
	c.t.Helper()
	shale, _ := binaries(c.t)
	if c.bin != "" {
		shale = c.bin
	}
	cn := c.node(id)
	args := []string{"--listen", cn.grpcAddr, "--http", cn.httpAddr, "--data-dir", cn.dataDir, "--log-format", "json"}
	args = append(args, c.extra...)
	if c.sec != nil && c.sec.nodeArgs != nil {
		args = append(args, c.sec.nodeArgs(id)...)
	}
	if err := cn.proc.Start(shale, args, firstArgs, 60*time.Second); err != nil {
		c.t.Fatalf("node %d: %v", id, err)
	}
}

func (cn *clusterNode) err() error { return cn.proc.ExitErr() }

func (cn *clusterNode) running() bool { return cn.proc.Running() }

// kill sends SIGKILL and waits until the process is gone.
func (cn *clusterNode) kill() { cn.proc.Kill() }

// stop sends SIGTERM and waits for a clean exit.
func (c *testCluster) stop(id uint64) {
	c.t.Helper()
	cn := c.node(id)
	start := time.Now()
	defer func() {
		// A graceful stop drains requests and ends the peers' streams: it
		// must not sit out its --shutdown-timeout (10 s).
		if took := time.Since(start); took > 5*time.Second {
			c.t.Errorf("node %d took %v to stop gracefully", id, took)
		}
	}()
	if !cn.proc.Signal(syscall.SIGTERM, 30*time.Second) {
		c.t.Fatalf("node %d still running 30s after SIGTERM\n%s", id, tail(cn.log(), 40))
	}
	if err := cn.err(); err != nil {
		c.t.Fatalf("node %d exited with %v after SIGTERM\n%s", id, err, tail(cn.log(), 40))
	}
}

func (cn *clusterNode) log() string { return cn.proc.Log() }

func tail(s string, n int) string { return clusterharness.Tail(s, n) }

// endpoints returns the gRPC addresses of the given nodes (all if none).
func (c *testCluster) endpoints(ids ...uint64) []string {
	var out []string
	for _, cn := range c.all() {
		if len(ids) == 0 || containsID(ids, cn.id) {
			out = append(out, cn.grpcAddr)
		}
	}
	return out
}

func containsID(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// client dials the given nodes (all if none) with the client library.
func (c *testCluster) client(ids ...uint64) *client.Client {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := &client.Options{RequestTimeout: 20 * time.Second}
	if c.sec != nil {
		opts.TLS = c.sec.tls
	}
	cl, err := client.Dial(ctx, c.endpoints(ids...), opts)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// raw returns KV and Admin clients of node id alone.
func (c *testCluster) raw(id uint64) (kvpb.KVClient, kvpb.AdminClient, func()) {
	c.t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+c.node(id).grpcAddr, grpc.WithTransportCredentials(c.dialCreds()))
	if err != nil {
		c.t.Fatal(err)
	}
	return kvpb.NewKVClient(cc), kvpb.NewAdminClient(cc), func() { cc.Close() }
}

// rangeState is what node id reports about its replica of rangeID.
func (c *testCluster) rangeState(id, rangeID uint64) (*kvpb.RangeStatus, error) {
	_, admin, done := c.raw(id)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := admin.Status(ctx, &kvpb.StatusRequest{})
	if err != nil {
		return nil, err
	}
	for _, r := range st.GetRanges() {
		if r.GetRangeDescriptor().GetRangeId() == rangeID {
			return r, nil
		}
	}
	return nil, fmt.Errorf("node %d holds no replica of range %d", id, rangeID)
}

// leader returns the node that leads rangeID (as the leader itself says),
// waiting up to timeout.
func (c *testCluster) leader(rangeID uint64, timeout time.Duration) (uint64, time.Duration) {
	c.t.Helper()
	start := time.Now()
	for time.Since(start) < timeout {
		for _, cn := range c.all() {
			if !cn.running() {
				continue
			}
			if rs, err := c.rangeState(cn.id, rangeID); err == nil && rs.GetRaft().GetState() == "leader" {
				return cn.id, time.Since(start)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no leader of range %d after %v", rangeID, timeout)
	return 0, 0
}

func (c *testCluster) waitLeaders(rangeIDs ...uint64) {
	c.t.Helper()
	for _, r := range rangeIDs {
		c.leader(r, 30*time.Second)
	}
}

// waitApplied waits until node id's replica of rangeID has applied index.
func (c *testCluster) waitApplied(id, rangeID, index uint64, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rs, err := c.rangeState(id, rangeID)
		if err == nil && rs.GetRaft().GetAppliedIndex() >= index {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d: range %d did not apply index %d within %v (state %v, err %v)", id, rangeID, index, timeout, rs.GetRaft(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// staleGet reads key from node id's own replica (no leader involved).
func (c *testCluster) staleGet(id uint64, key string) (string, bool, error) {
	kv, _, done := c.raw(id)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := kv.Get(ctx, &kvpb.GetRequest{Key: []byte(key),
		Header: &kvpb.RequestHeader{ReadConsistency: kvpb.ReadConsistency_READ_CONSISTENCY_STALE}})
	if err != nil {
		return "", false, err
	}
	return string(resp.GetValue()), resp.GetFound(), nil
}

// metric returns the value of a metric line (name with labels, exactly as
// exported) from node id's /metrics, or -1 if absent.
func (c *testCluster) metric(id uint64, name string) float64 {
	c.t.Helper()
	return metricAt(c.t, c.node(id).httpAddr, name)
}

// metricAt returns a metric line's value (name with labels, exactly as
// exported) from the /metrics of the node serving HTTP at httpAddr, or -1
// if absent.
func metricAt(t testing.TB, httpAddr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, name+" ")), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// writer writes keys prefix-0, prefix-1, ... through cl from several
// goroutines until stop is closed, max writes are done or the deadline
// passes, and records which writes were acknowledged.
type writer struct {
	mu        sync.Mutex
	acked     map[string]string
	ambiguous int
	failed    int
	lastErr   error // the last failed or ambiguous outcome
	wg        sync.WaitGroup
	stop      chan struct{}
	next      int64
}

func startWriter(cl *client.Client, prefix string, workers, max int, deadline time.Duration) *writer {
	w := &writer{acked: map[string]string{}, stop: make(chan struct{})}
	end := time.Now().Add(deadline)
	var nextMu sync.Mutex
	for i := 0; i < workers; i++ {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for time.Now().Before(end) {
				select {
				case <-w.stop:
					return
				default:
				}
				nextMu.Lock()
				n := w.next
				w.next++
				nextMu.Unlock()
				if max > 0 && n >= int64(max) {
					return
				}
				k, v := fmt.Sprintf("%s-%07d", prefix, n), fmt.Sprintf("v%d", n)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := cl.Put(ctx, []byte(k), []byte(v))
				cancel()
				w.mu.Lock()
				switch {
				case err == nil:
					w.acked[k] = v
				case errors.Is(err, client.ErrAmbiguous):
					w.ambiguous++
					w.lastErr = err
				default:
					w.failed++
					w.lastErr = err
				}
				w.mu.Unlock()
			}
		}()
	}
	return w
}

// wait waits until the writer has done its max writes (or hit its
// deadline) and returns what was acknowledged.
func (w *writer) wait() map[string]string {
	w.wg.Wait()
	return w.finish()
}

// finish stops the writer and returns what was acknowledged.
func (w *writer) finish() map[string]string {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
	return w.acked
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// waitMore waits until the writer has had n more writes acknowledged than
// when called, polling; it fails t if that takes longer than within. Tests
// use it where they need writes to go on for a while (before a fault,
// through a new leader) instead of sleeping a fixed time: on a loaded
// machine a fixed time may hold no write at all.
func (w *writer) waitMore(t testing.TB, n int, within time.Duration) {
	t.Helper()
	want := w.count() + n
	deadline := time.Now().Add(within)
	for w.count() < want {
		if time.Now().After(deadline) {
			w.mu.Lock()
			last := w.lastErr
			w.mu.Unlock()
			t.Fatalf("%d of %d more writes acknowledged within %v (last error: %v)", w.count()-want+n, n, within, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkAcked reads every acknowledged write back through cl
// (linearizable reads) and fails on any missing or wrong value.
func checkAcked(t testing.TB, cl *client.Client, acked map[string]string) {
	t.Helper()
	keys := make([][]byte, 0, len(acked))
	for k := range acked {
		keys = append(keys, []byte(k))
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := cl.BatchGet(ctx, keys[:n])
		cancel()
		if err != nil {
			t.Fatalf("reading back acknowledged writes: %v", err)
		}
		for i, r := range res {
			k := string(keys[i])
			if !r.Found || string(r.Value) != acked[k] {
				t.Fatalf("acknowledged write %s=%s lost (found %v, value %q)", k, acked[k], r.Found, r.Value)
			}
		}
		keys = keys[n:]
	}
}
