package jepsen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/tests/internal/clusterharness"
)

// The cluster runs real shale processes. Node i listens on 127.0.26.i (or
// on $SHALE_TEST_NET.i) and dials its peers from that address, so iptables
// rules on the pair of addresses cut exactly the links a nemesis names. Clients connect from
// 127.0.0.1 and are never cut off: like Jepsen's clients, they may talk to
// a node on the minority side.
//
// Timings are the production ones halved (50 ms ticks, elections after
// 10-20 ticks) so that a fault and its recovery fit in a few seconds.

const (
	raftTick = 50 * time.Millisecond
	// electionTimeout is the longest randomized election timeout.
	electionTimeout = 20 * raftTick
)

// ipPrefix is the /24 of the nodes' addresses: 127.0.26. (the role's
// 26xxx), or $SHALE_TEST_NET's (say 127.0.5) so that runs on a shared
// machine, and their iptables partitions, stay off each other's nodes.
var ipPrefix = func() string {
	if v := os.Getenv("SHALE_TEST_NET"); v != "" {
		return v + "."
	}
	return "127.0.26."
}()

type node struct {
	id       uint64
	ip       string
	grpcAddr string
	httpAddr string
	dataDir  string
	proc     *clusterharness.Proc // the process: start, signals, log

	mu      sync.Mutex
	removed bool // taken out of the cluster by the membership nemesis
}

// cluster is a set of shale processes. Its methods are safe for concurrent
// use by the nemesis, the leader monitor and the runner.
type cluster struct {
	t    testing.TB
	bin  string
	dir  string
	mu   sync.Mutex
	byID map[uint64]*node
	next uint64 // the ID the next added node gets
	// version counts membership changes: clients dialled at an older
	// version may name only removed nodes.
	version atomic.Uint64
	// smallDisks: every node's data directory is a small file system of
	// its own, with a disk reserve to match (nemesis_fulldisk_test.go);
	// smallDiskErr says why that could not be done.
	smallDisks   bool
	smallDiskErr string
	// flags are given to every node at every start.
	flags []string
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// shaleBinary returns $SHALE_BIN or builds cmd/shale once per test process
// (stamped with the engine library's digest, as the Makefile does), with
// the `faults` tag so that the slow-disk nemesis can drive it.
func shaleBinary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("SHALE_BIN"); b != "" {
		return b
	}
	return faultsBinary(t)
}

// faultsBinary builds cmd/shale with the `faults` tag once per test
// process, whatever $SHALE_BIN names (make test passes the plain binary):
// for tests that drive a fault hook themselves.
func faultsBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shale-jepsen-bin-")
		if err != nil {
			buildErr = err
			return
		}
		wd, _ := os.Getwd()
		root := filepath.Dir(filepath.Dir(wd)) // tests/jepsen is two below the root
		ldflags := ""
		if lib, err := os.ReadFile(filepath.Join(root, "build", "engine", "libshale_engine.a")); err == nil {
			sum := sha256.Sum256(lib)
			ldflags = "-X github.com/shaledb/shale/storage.engineStamp=" + hex.EncodeToString(sum[:8])
		}
		buildBin = filepath.Join(dir, "shale")
		cmd := exec.Command("go", "build", "-tags", "faults", "-ldflags", ldflags, "-o", buildBin, "./cmd/shale")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build -tags faults ./cmd/shale: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// startCluster bootstraps n nodes (IDs 1..n) in dir, each started with
// flags too, and waits until every range has a leader.
func startCluster(t testing.TB, dir string, n int, smallDisks bool, flags ...string) *cluster {
	t.Helper()
	return startClusterBin(t, shaleBinary(t), dir, n, smallDisks, flags...)
}

// startClusterBin is startCluster running binary bin.
func startClusterBin(t testing.TB, bin, dir string, n int, smallDisks bool, flags ...string) *cluster {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, bin: bin, dir: dir, byID: map[uint64]*node{}, next: uint64(n) + 1, smallDisks: smallDisks, flags: flags}
	var members []string
	for id := uint64(1); id <= uint64(n); id++ {
		nd := c.newNode(id)
		members = append(members, fmt.Sprintf("%d=%s", id, nd.grpcAddr))
	}
	initial := strings.Join(members, ",")
	t.Cleanup(func() {
		for _, nd := range c.nodes(true) {
			nd.kill()
		}
	})
	for id := uint64(1); id <= uint64(n); id++ {
		if err := c.start(id, "--initial-cluster", initial); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.waitLeaders(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cluster) newNode(id uint64) *node {
	ip := ipPrefix + strconv.FormatUint(id, 10)
	// The node's ports are held for the whole test, and every start
	// inherits listeners on them (clusterharness.Port).
	grpcPort, httpPort := reservePort(c.t, ip), reservePort(c.t, ip)
	nd := &node{id: id, ip: ip, grpcAddr: grpcPort.Addr(), httpAddr: httpPort.Addr(),
		dataDir: filepath.Join(c.dir, fmt.Sprint("node", id)),
	}
	nd.proc = clusterharness.NewProc(nd.httpAddr, filepath.Join(c.dir, fmt.Sprintf("node%d.log", id)))
	nd.proc.Inherit(clusterharness.Socket{Flag: "--listen-fd", Port: grpcPort},
		clusterharness.Socket{Flag: "--http-fd", Port: httpPort})
	if c.smallDisks && c.smallDiskErr == "" {
		c.smallDiskErr = mountSmallDisk(c.t, nd.dataDir)
	}
	c.mu.Lock()
	c.byID[id] = nd
	c.mu.Unlock()
	c.version.Add(1)
	return nd
}

// reservePort holds a port on ip until the test ends.
func reservePort(t testing.TB, ip string) *clusterharness.Port {
	t.Helper()
	port, err := clusterharness.ReservePort(ip)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { port.Close() })
	return port
}

func (c *cluster) node(id uint64) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id]
}

// nodes returns the cluster's nodes in ID order; removed ones only with
// all.
func (c *cluster) nodes(all bool) []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*node
	for id := uint64(1); id < c.next; id++ {
		if nd := c.byID[id]; nd != nil && (all || !nd.isRemoved()) {
			out = append(out, nd)
		}
	}
	return out
}

func (c *cluster) ids() []uint64 {
	var out []uint64
	for _, nd := range c.nodes(false) {
		out = append(out, nd.id)
	}
	return out
}

func (c *cluster) endpoints() []string {
	var out []string
	for _, nd := range c.nodes(false) {
		out = append(out, nd.grpcAddr)
	}
	return out
}

// start starts node id's process (firstArgs on its first start only, as
// on a real deployment) and waits until it reports healthy.
func (c *cluster) start(id uint64, firstArgs ...string) error {
	nd := c.node(id)
	args := []string{"--listen", nd.grpcAddr, "--http", nd.httpAddr, "--data-dir", nd.dataDir,
		"--log-format", "json", "--raft-tick", raftTick.String()}
	if c.smallDisks {
		args = append(args, smallDiskFlags...)
	}
	args = append(args, c.flags...)
	if err := nd.proc.Start(c.bin, args, firstArgs, 60*time.Second); err != nil {
		return fmt.Errorf("node %d: %w", id, err)
	}
	return nil
}

func (nd *node) isRemoved() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.removed
}

func (nd *node) running() bool { return nd.proc.Running() }

// kill sends SIGKILL (a paused node dies too) and waits until the process
// is gone.
func (nd *node) kill() { nd.proc.Kill() }

// pause stops the process with SIGSTOP; resume continues it.
func (nd *node) pause() error {
	if err := nd.proc.Pause(); err != nil {
		return fmt.Errorf("node %d: %w", nd.id, err)
	}
	return nil
}

func (nd *node) resume() error {
	if err := nd.proc.Resume(); err != nil {
		return fmt.Errorf("node %d: %w", nd.id, err)
	}
	return nil
}

func (nd *node) isPaused() bool { return nd.proc.Paused() }

func (nd *node) log() string { return nd.proc.Log() }

// admin returns an Admin client of node nd alone and its closer.
func (nd *node) admin() (kvpb.AdminClient, func(), error) {
	cc, err := grpc.NewClient("passthrough:///"+nd.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("node %d: %w", nd.id, err)
	}
	return kvpb.NewAdminClient(cc), func() { cc.Close() }, nil
}

// status asks node nd for its status, giving up after timeout (a paused
// or cut-off node does not answer).
func (nd *node) status(timeout time.Duration) (*kvpb.StatusResponse, error) {
	admin, done, err := nd.admin()
	if err != nil {
		return nil, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return admin.Status(ctx, &kvpb.StatusRequest{})
}

// leaders returns, per range, the node that says it leads it, asking the
// running nodes in parallel. A range missing from the map has no leader
// that answered.
func (c *cluster) leaders(timeout time.Duration) map[uint64]leaderInfo {
	nodes := c.nodes(false)
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[uint64]leaderInfo{}
	for _, nd := range nodes {
		if !nd.running() || nd.isPaused() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := nd.status(timeout)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range st.GetRanges() {
				if r.GetRaft().GetState() != "leader" {
					continue
				}
				id := r.GetRangeDescriptor().GetRangeId()
				li := leaderInfo{node: nd.id, term: r.GetRaft().GetTerm()}
				if old, ok := out[id]; !ok || li.term > old.term {
					out[id] = li
				}
			}
		}()
	}
	wg.Wait()
	return out
}

type leaderInfo struct {
	node uint64
	term uint64
}

// waitLeaders waits until every range a node knows has a leader.
func (c *cluster) waitLeaders(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		want := map[uint64]bool{}
		for _, nd := range c.nodes(false) {
			if st, err := nd.status(time.Second); err == nil {
				for _, r := range st.GetRanges() {
					want[r.GetRangeDescriptor().GetRangeId()] = true
				}
			}
		}
		ls := c.leaders(time.Second)
		missing := 0
		for id := range want {
			if _, ok := ls[id]; !ok {
				missing++
			}
		}
		if len(want) > 0 && missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d ranges have no leader after %v", missing, len(want), timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaderOf returns the leader of the range holding key, or 0.
func (c *cluster) leaderOf(rangeID uint64) uint64 {
	return c.leaders(500 * time.Millisecond)[rangeID].node
}

// dial returns a client of every current node.
func (c *cluster) dial(timeout time.Duration) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return client.Dial(ctx, c.endpoints(), &client.Options{RequestTimeout: timeout, MaxBackoff: 200 * time.Millisecond})
}
