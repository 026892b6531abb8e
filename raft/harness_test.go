package raft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/transport"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
)

// The tests of this package run real stores: each node has its own engine
// in a temporary directory and its own gRPC server on 127.0.0.1, and the
// stores talk through the real transport. Ticks are short (20 ms, election
// after 10) so that elections take a fraction of a second.

const testTick = 20 * time.Millisecond

type testNode struct {
	id    uint64
	dir   string
	addr  string
	lis   *nodeListener // holds addr's port for the whole test
	db    *storage.DB
	store *Store
	srv   *grpc.Server
}

type testCluster struct {
	t         testing.TB
	clusterID string
	tweak     func(*Config)
	mu        sync.Mutex
	nodes     map[uint64]*testNode
	addrs     map[uint64]string
	fatal     chan error
}

// newTestCluster bootstraps n nodes (IDs 1..n) and starts them.
func newTestCluster(t testing.TB, n int, tweak func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, clusterID: "test-" + t.Name(), tweak: tweak,
		nodes: map[uint64]*testNode{}, addrs: map[uint64]string{}, fatal: make(chan error, 16)}
	var descs []*kvpb.NodeDescriptor
	for i := uint64(1); i <= uint64(n); i++ {
		c.nodes[i] = &testNode{id: i, dir: filepath.Join(t.TempDir(), fmt.Sprint("n", i))}
		c.nodes[i].lis = c.listen()
		c.addrs[i] = c.nodes[i].lis.addr()
		c.nodes[i].addr = c.addrs[i]
		descs = append(descs, &kvpb.NodeDescriptor{NodeId: i, Address: c.addrs[i]})
	}
	for i := uint64(1); i <= uint64(n); i++ {
		db, err := storage.Open(c.nodes[i].dir, keys.WithUserVersions(nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := Bootstrap(db, c.clusterID, i, descs); err != nil {
			t.Fatal(err)
		}
		c.nodes[i].db = db
	}
	for i := uint64(1); i <= uint64(n); i++ {
		c.start(i)
	}
	t.Cleanup(c.stopAll)
	return c
}

// listen takes a loopback port for a node, held until the test ends.
func (c *testCluster) listen() *nodeListener {
	nl, err := newNodeListener()
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nl.close)
	return nl
}

func (c *testCluster) config(id uint64, db *storage.DB) Config {
	cfg := Config{
		Engine: db, StateMachines: rangeStateMachines(db), NodeID: id, ClusterID: c.clusterID,
		Peers:        c.peerAddrs(),
		TickInterval: testTick, ElectionTicks: 10, HeartbeatTicks: 1,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Fatal: func(msg string, err error) {
			c.fatal <- fmt.Errorf("node %d: %s: %w", id, msg, err)
			panic(fmt.Sprintf("node %d: fatal: %s: %v", id, msg, err))
		},
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	return cfg
}

func (c *testCluster) peerAddrs() map[uint64]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[uint64]string{}
	for id, a := range c.addrs {
		m[id] = a
	}
	return m
}

// start opens (if needed) node id's engine and starts its store and
// server on its address.
func (c *testCluster) start(id uint64) {
	c.t.Helper()
	n := c.node(id)
	if n.db == nil {
		db, err := storage.Open(n.dir, keys.WithUserVersions(nil))
		if err != nil {
			c.t.Fatal(err)
		}
		c.mu.Lock()
		n.db = db
		c.mu.Unlock()
	}
	s, err := NewStore(c.config(id, n.db))
	if err != nil {
		c.t.Fatalf("node %d: %v", id, err)
	}
	lis := n.lis.serve()
	srv := grpc.NewServer(transport.ServerOptions()...)
	s.RegisterServer(srv)
	go func() { _ = srv.Serve(lis) }()
	s.Start()
	c.mu.Lock()
	n.store, n.srv = s, srv
	c.mu.Unlock()
}

// stop stops node id: the server first (as a crash would cut it off),
// then the store and the engine.
func (c *testCluster) stop(id uint64) {
	c.mu.Lock()
	n := c.nodes[id]
	store, srv, db := n.store, n.srv, n.db
	n.store, n.srv, n.db = nil, nil, nil
	c.mu.Unlock()
	if store == nil {
		return
	}
	srv.Stop()
	store.Stop()
	if err := db.Close(); err != nil {
		c.t.Errorf("node %d: closing the engine: %v", id, err)
	}
}

// node returns node id.
func (c *testCluster) node(id uint64) *testNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

// ids returns the IDs of every node, running or not.
func (c *testCluster) ids() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []uint64
	for id := range c.nodes {
		out = append(out, id)
	}
	return out
}

// storeOf returns node id's running store, or nil.
func (c *testCluster) storeOf(id uint64) *Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[id]; n != nil {
		return n.store
	}
	return nil
}

// running returns the running stores by node ID.
func (c *testCluster) running() map[uint64]*Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[uint64]*Store{}
	for id, n := range c.nodes {
		if n.store != nil {
			m[id] = n.store
		}
	}
	return m
}

func (c *testCluster) stopAll() {
	for _, id := range c.ids() {
		c.stop(id)
	}
	select {
	case err := <-c.fatal:
		c.t.Errorf("a node failed: %v", err)
	default:
	}
}

// addJoiningNode prepares node id as a new, empty store of the cluster and
// starts it; it holds no replica until one is added.
func (c *testCluster) addJoiningNode(id uint64) *testNode {
	n := &testNode{id: id, dir: filepath.Join(c.t.TempDir(), fmt.Sprint("n", id)), lis: c.listen()}
	n.addr = n.lis.addr()
	db, err := storage.Open(n.dir, keys.WithUserVersions(nil))
	if err != nil {
		c.t.Fatal(err)
	}
	if err := WriteStoreIdent(db, StoreIdent{ClusterID: c.clusterID, NodeID: id}); err != nil {
		c.t.Fatal(err)
	}
	n.db = db
	c.mu.Lock()
	c.addrs[id] = n.addr
	c.nodes[id] = n
	c.mu.Unlock()
	for _, s := range c.running() {
		s.SetPeerAddress(id, n.addr)
	}
	c.start(id)
	return n
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leaderNode is a running leader: its ID and store.
type leaderNode struct {
	id    uint64
	store *Store
}

// leader waits for a leader of rangeID among the running nodes.
func (c *testCluster) leader(rangeID uint64) leaderNode {
	c.t.Helper()
	var l leaderNode
	waitFor(c.t, 10*time.Second, fmt.Sprintf("a leader of range %d", rangeID), func() bool {
		for id, s := range c.running() {
			if r, err := s.Replica(rangeID); err == nil && r.IsLeader() {
				l = leaderNode{id: id, store: s}
				return true
			}
		}
		return false
	})
	return l
}

// put writes key=value through range rangeID's leader, retrying routing
// errors until ctx expires.
func (c *testCluster) put(ctx context.Context, rangeID uint64, key, value string) (uint64, error) {
	for {
		n := c.leader(rangeID)
		cmd := &command.Command{Kind: command.KindPut, Mutations: []command.Mutation{{Kind: command.KindPut, Key: []byte(key), Value: []byte(value)}}}
		res, idx, err := n.store.Propose(ctx, rangeID, cmd)
		if err == nil {
			return idx, res.Err()
		}
		// A Put of the same value is idempotent: an ambiguous one is
		// retried too.
		if errors.Is(err, ErrNotLeader) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrAmbiguous) {
			if ctx.Err() != nil {
				return 0, err
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		return 0, err
	}
}

// get reads a user key straight from node id's engine.
func (c *testCluster) get(id uint64, key string) (string, bool) {
	c.mu.Lock()
	db := c.nodes[id].db
	c.mu.Unlock()
	kv, found, err := keys.UserKeyspace.Get(db, []byte(key), hlc.MaxTimestamp)
	if err != nil {
		c.t.Fatalf("node %d: get %q: %v", id, key, err)
	}
	return string(kv.Value), found
}

// waitApplied waits until every running replica of rangeID has applied at
// least index.
func (c *testCluster) waitApplied(rangeID, index uint64) {
	c.t.Helper()
	waitFor(c.t, 20*time.Second, fmt.Sprintf("range %d applied at %d everywhere", rangeID, index), func() bool {
		for _, s := range c.running() {
			r, err := s.Replica(rangeID)
			if err != nil || r.AppliedIndex() < index {
				return false
			}
		}
		return true
	})
}

// rangeStateMachines is the production state machine factory over db: the
// replication tests run the real range state machine.
func rangeStateMachines(db *storage.DB) apply.Factory {
	f, err := rangesm.NewFactory(rangesm.Config{Engine: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	return f
}
