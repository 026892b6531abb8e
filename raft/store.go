package raft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/raft/transport"
	"github.com/shaledb/shale/storage"
)

// Store hosts every replica of one node: it loads them from the engine,
// runs the processing rounds that drive their Raft groups, and connects
// them to the transport. It is safe for concurrent use.
type Store struct {
	cfg       Config
	transport Transport
	sched     *scheduler
	pool      *workerPool
	// applyGroups: one per concurrent worker of a round, apply_round.go.
	applyGroups []*applyGroup
	appendQ     *appendQueue
	manualBatch *storage.Batch // StepLogWrite's batch (manual.go)
	stepMu      sync.Mutex     // held through a manual step (manual.go)
	metrics     *Metrics

	// proposalSeq numbers proposals; it starts at the wall clock in
	// nanoseconds so that IDs stay unique across restarts (an entry
	// proposed before a restart may apply after it).
	proposalSeq atomic.Uint64

	ctx     context.Context // canceled by Stop
	cancel  context.CancelFunc
	stopped chan struct{} // closed by Stop
	wg      sync.WaitGroup
	snapSem chan struct{} // bounds concurrent outgoing snapshots
	// snapMem bounds the memory of incoming snapshots (nil: unbounded;
	// snapshot_memory.go).
	snapMem *snapshotMemory
	// splitWaits records when messages for a range split off a local
	// range that has not applied the split yet were first dropped
	// (store_transport.go, awaitSplit).
	splitWaits struct {
		sync.Mutex
		since map[uint64]time.Time
	}
	// logBytes is the approximate sum of the replicas' Raft logs, for
	// LogBudgetBytes (truncate.go).
	logBytes atomic.Int64
	// entryCaches bounds the replicas' entry caches together
	// (Config.EntryCacheNodeBytes).
	entryCaches *logstore.CacheBudget
	// stall tracks the log writer's writes for disk-stall detection
	// (diskstall.go).
	stall diskStall
	// remoteMeta reaches meta from a node without a replica of it.
	remoteMeta atomic.Pointer[RemoteMeta]

	// changeMu serializes membership changes and leadership transfers
	// started on this node.
	changeMu sync.Mutex
	// mergeMu serializes the merges coordinated by this node.
	mergeMu sync.Mutex

	mu struct {
		sync.RWMutex
		replicas map[uint64]*Replica
		started  bool
		stopping bool
	}
	// awake holds the replicas the ticker ticks: every replica of
	// mu.replicas that is not asleep (quiesce.go). Sleeping replicas are
	// left out so that a tick costs in proportion to the ranges at work,
	// not to every range on the node. Lock order: mu before awake.
	awake struct {
		sync.Mutex
		reps map[*Replica]struct{}
	}
	peers struct {
		sync.RWMutex
		addrs map[uint64]string
	}
	// lastContact is when each node last sent this node Raft messages
	// or a node heartbeat (Unix nanoseconds, on the Store's clock), for
	// liveness (liveness.go) and liveness reports.
	lastContact sync.Map // uint64 -> *atomic.Int64
	// tick is the ticker's working state (tickReplicas, liveness.go).
	tick struct {
		mu       sync.Mutex
		reps     []*Replica
		peers    []uint64 // nodes to heartbeat, sorted
		peersAge int      // ticks since peers was computed
		silence  map[uint64]*peerSilence
		lastAt   time.Time // the clock at the last tick (awake.go)
	}
	// awakeSince is since when the ticker has run without a pause, in
	// Unix nanoseconds (awake.go); 0 before the first tick.
	awakeSince atomic.Int64
	// ticks counts the ticker's ticks (quiesce.go counts the ticks a
	// replica slept through with it).
	ticks atomic.Uint64
	// roundSeq counts the processing rounds begun (store_round.go).
	roundSeq atomic.Uint64
	// deadNodes are the peers not live as of the last tick (liveness.go).
	deadNodes atomic.Pointer[map[uint64]bool]
}

// LastContact returns when node nodeID last sent this node a Raft message
// (zero if never since this node started).
func (s *Store) LastContact(nodeID uint64) time.Time {
	v, ok := s.lastContact.Load(nodeID)
	if !ok {
		return time.Time{}
	}
	return time.Unix(0, v.(*atomic.Int64).Load())
}

func (s *Store) noteContact(nodeID uint64) {
	v, ok := s.lastContact.Load(nodeID)
	if !ok {
		v, _ = s.lastContact.LoadOrStore(nodeID, new(atomic.Int64))
	}
	v.(*atomic.Int64).Store(s.cfg.Clock.Now().UnixNano())
}

// NewStore opens the store of a bootstrapped (or joined) engine: it checks
// the store identity and loads every replica. Start must be called before
// it serves.
func NewStore(cfg Config) (*Store, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	ident, err := ReadStoreIdent(cfg.Engine)
	if err != nil {
		return nil, err
	}
	if ident == nil {
		return nil, ErrNotBootstrapped
	}
	if ident.NodeID != cfg.NodeID || ident.ClusterID != cfg.ClusterID {
		return nil, fmt.Errorf("raft: this engine belongs to node %d of cluster %q, not node %d of cluster %q",
			ident.NodeID, ident.ClusterID, cfg.NodeID, cfg.ClusterID)
	}
	s := &Store{
		cfg:         cfg,
		sched:       newScheduler(),
		appendQ:     newAppendQueue(),
		metrics:     newMetrics(),
		stopped:     make(chan struct{}),
		snapSem:     make(chan struct{}, 2),
		snapMem:     newSnapshotMemory(cfg.SnapshotMemoryBytes),
		entryCaches: logstore.NewCacheBudget(cfg.EntryCacheNodeBytes),
		stall:       diskStall{base: cfg.Clock.Now()},
	}
	if cfg.testSnapshotMemory != nil {
		s.snapMem = cfg.testSnapshotMemory
	}
	s.proposalSeq.Store(uint64(cfg.Clock.Now().UnixNano()))
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.replicas = make(map[uint64]*Replica)
	s.awake.reps = make(map[*Replica]struct{})
	if s.peers.addrs, err = loadPeerAddresses(cfg.Engine); err != nil {
		return nil, err
	}
	for id, a := range cfg.Peers {
		s.SetPeerAddress(id, a)
	}
	newTransport := cfg.NewTransport
	if newTransport == nil {
		newTransport = s.newGRPCTransport
	}
	s.transport, err = newTransport(TransportHandlers{Handler: s, OnUnreachable: s.onUnreachable, OnAck: s.onAck,
		OnBatchSent: func(uint64, int) { s.metrics.batchesSent.Inc() }})
	if err != nil {
		return nil, fmt.Errorf("raft: making the transport: %w", err)
	}
	ids, err := storedRangeIDs(cfg.Engine)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		tomb, err := logstore.LoadTombstone(cfg.Engine, id)
		if err != nil {
			return nil, err
		}
		rid, err := logstore.LoadReplicaID(cfg.Engine, id)
		if err != nil {
			return nil, err
		}
		if rid == 0 || rid < tomb {
			continue // removed; only the tombstone is left
		}
		r, err := s.newReplica(id, rid)
		if err != nil {
			return nil, err
		}
		s.mu.replicas[id] = r
		s.setAwake(r, true)
	}
	return s, nil
}

// storedRangeIDs finds every range with node-local state, seeking from one
// range to the next rather than reading their logs.
func storedRangeIDs(db *storage.DB) ([]uint64, error) {
	lo := []byte{keys.NodeLocalPrefix, 'r'}
	hi := []byte{keys.NodeLocalPrefix, 'r' + 1}
	it, err := db.NewIter(&storage.IterOptions{LowerBound: lo, UpperBound: hi, KeysOnly: true})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var ids []uint64
	for ok := it.First(); ok; {
		k := it.UnsafeKey()
		if len(k) < 10 {
			return nil, fmt.Errorf("raft: malformed node-local key %x", k)
		}
		id := binary.BigEndian.Uint64(k[2:10])
		ids = append(ids, id)
		if id == ^uint64(0) {
			break
		}
		ok = it.SeekGE(keys.NodeLocalRangeSpan(id + 1).Start)
	}
	return ids, it.Error()
}

// RegisterServer registers the node-to-node Raft service on srv. The
// server should be built with transport.ServerOptions(). It does nothing
// when the Store runs over another transport than the gRPC one.
func (s *Store) RegisterServer(srv *grpc.Server) {
	if t, ok := s.transport.(*transport.Transport); ok {
		t.Register(srv)
	}
}

// StopServing refuses new incoming Raft streams and ends the open ones (a
// node shutting down), when the Store runs over the gRPC transport.
func (s *Store) StopServing() {
	if t, ok := s.transport.(*transport.Transport); ok {
		t.StopServing()
	}
}

// Metrics returns the store's Prometheus collectors.
func (s *Store) Metrics() *Metrics { return s.metrics }

// Config returns the store's configuration (with defaults applied).
func (s *Store) Config() Config { return s.cfg }

// NodeID returns this node's ID.
func (s *Store) NodeID() uint64 { return s.cfg.NodeID }

// Start starts processing: the worker pool, the processing loop, the
// ticker and background maintenance.
func (s *Store) Start() {
	s.mu.Lock()
	if s.mu.started {
		s.mu.Unlock()
		return
	}
	s.mu.started = true
	reps := make([]*Replica, 0, len(s.mu.replicas))
	for _, r := range s.mu.replicas {
		reps = append(reps, r)
	}
	s.mu.Unlock()
	goroutines, groups := s.poolWorkers()
	s.pool = newWorkerPool(goroutines)
	s.applyGroups = newApplyGroups(s, groups)
	if !s.cfg.Manual {
		s.wg.Add(3)
		go s.processLoop()
		go s.logWriterLoop()
		go s.tickLoop()
	}
	for _, r := range reps {
		if r.shouldCampaignOnStart() {
			r.in.Lock()
			r.in.inspect = append(r.in.inspect, func(r *Replica) {
				if err := r.rn.Campaign(); err != nil {
					s.cfg.Logger.Debug("campaign on start", "range", r.rangeID, "err", err)
				}
			})
			r.in.Unlock()
		}
		s.sched.enqueue(r)
	}
}

// Stop stops processing and the transport. Writes in flight finish as
// ambiguous; the engine is left open for the caller to close.
func (s *Store) Stop() {
	s.mu.Lock()
	if s.mu.stopping {
		s.mu.Unlock()
		return
	}
	s.mu.stopping = true
	started := s.mu.started
	s.mu.Unlock()
	close(s.stopped)
	s.cancel()
	s.sched.stop()
	s.appendQ.stop()
	s.transport.Close()
	s.wg.Wait()
	if started {
		s.pool.stop()
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, r := range s.mu.replicas {
		r.raftMu.Lock()
		r.failProposalsLocked("node stopping", ErrStopped)
		r.failReadsLocked(unavailablef(r.rangeID, "%v", ErrStopped))
		r.raftMu.Unlock()
	}
}

func (s *Store) checkRunning() error {
	select {
	case <-s.stopped:
		return ErrStopped
	default:
		return nil
	}
}

func (s *Store) nextProposalID() uint64 { return s.proposalSeq.Add(1) }

// Replica returns this node's replica of rangeID.
func (s *Store) Replica(rangeID uint64) (*Replica, error) {
	s.mu.RLock()
	r := s.mu.replicas[rangeID]
	s.mu.RUnlock()
	if r == nil {
		return nil, fmt.Errorf("%w: range %d on node %d", ErrRangeNotFound, rangeID, s.cfg.NodeID)
	}
	return r, nil
}

// Replicas returns every replica of the node, by range ID.
func (s *Store) Replicas() []*Replica {
	s.mu.RLock()
	out := make([]*Replica, 0, len(s.mu.replicas))
	for _, r := range s.mu.replicas {
		out = append(out, r)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].rangeID < out[j].rangeID })
	return out
}

// ReplicaForKey returns the local, initialized replica whose user span
// holds userKey.
func (s *Store) ReplicaForKey(userKey []byte) (*Replica, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, r := range s.mu.replicas {
		if d := r.Descriptor(); d != nil && keys.ContainsUserKey(d, userKey) {
			return r, nil
		}
	}
	return nil, fmt.Errorf("%w: no range on node %d holds key %q", ErrRangeNotFound, s.cfg.NodeID, userKey)
}

// getOrCreateReplica returns the replica of rangeID, creating an
// uninitialized one with replicaID if the node has none (a new replica
// being added by its leader). A replica ID at or below a tombstone is
// refused: that replica was removed here.
func (s *Store) getOrCreateReplica(rangeID, replicaID uint64) (*Replica, error) {
	if r, err := s.Replica(rangeID); err == nil {
		if r.replicaID != replicaID {
			return nil, fmt.Errorf("raft: range %d: message for replica %d, this node holds replica %d", rangeID, replicaID, r.replicaID)
		}
		return r, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.mu.replicas[rangeID]; r != nil {
		return r, nil
	}
	if s.mu.stopping {
		return nil, ErrStopped
	}
	tomb, err := logstore.LoadTombstone(s.cfg.Engine, rangeID)
	if err != nil {
		return nil, err
	}
	if replicaID < tomb {
		return nil, fmt.Errorf("%w: replica %d of range %d was removed from node %d", ErrRangeNotFound, replicaID, rangeID, s.cfg.NodeID)
	}
	// The replica ID must be durable before Raft state is: it is the
	// identity under which this node votes and acknowledges.
	b := storage.NewBatch(64)
	b.Put(keys.ReplicaIDKey(rangeID), logstore.EncodeReplicaID(replicaID))
	if err := s.writeEngine(b, storage.Sync); err != nil {
		return nil, fmt.Errorf("raft: creating replica %d of range %d: %w", replicaID, rangeID, err)
	}
	r, err := s.newReplica(rangeID, replicaID)
	if err != nil {
		return nil, err
	}
	s.mu.replicas[rangeID] = r
	s.setAwake(r, true)
	s.cfg.Logger.Info("created uninitialized replica", "range", rangeID, "replica", replicaID)
	if s.mu.started {
		s.sched.enqueue(r)
	}
	return r, nil
}

// destroyReplica removes a replica that a configuration change removed
// from this node: its data and Raft state are deleted and a tombstone
// keeps stale messages from recreating it.
// REQUIRES: r.raftMu.
func (s *Store) destroyReplicaLocked(r *Replica) error {
	b := storage.NewBatch(256)
	del := func(sp keys.Span) { b.DeleteRange(sp.Start, sp.End) }
	if r.desc != nil {
		for _, sp := range s.unownedSpans(r, keys.DataSpan(r.desc)) {
			del(sp)
		}
	}
	del(keys.RangeLocalSpan(r.rangeID))
	del(keys.NodeLocalRangeSpan(r.rangeID))
	b.Put(keys.TombstoneKey(r.rangeID), logstore.EncodeReplicaID(r.replicaID+1))
	if err := s.writeEngine(b, storage.Sync); err != nil {
		return err
	}
	r.retireLocked("replica removed", unavailablef(r.rangeID, "replica removed from node %d", s.cfg.NodeID))
	s.cfg.Logger.Info("removed replica", "range", r.rangeID, "replica", r.replicaID)
	return nil
}

// retireLocked takes a replica whose state is deleted (removed from this
// node, or merged into its left-hand neighbour) out of the store: it
// leaves the replica map and the awake set, gives back its log bytes and
// entry cache, and its proposals fail with reason, its reads with
// readErr, and its applied-index waiters are released.
// REQUIRES: raftMu.
func (r *Replica) retireLocked(reason string, readErr error) {
	s := r.store
	s.mu.Lock()
	if s.mu.replicas[r.rangeID] == r {
		delete(s.mu.replicas, r.rangeID)
	}
	s.setAwake(r, false)
	s.mu.Unlock()
	r.uncountLogBytesLocked()
	r.ls.ReleaseCache()
	r.forgetSleepLocked()
	r.failProposalsLocked(reason, nil)
	r.failReadsLocked(readErr)
	r.mu.Lock()
	r.mu.destroyed = true
	r.mu.state = 0
	r.mu.leaseExpiry = time.Time{}
	r.releaseWaitersLocked()
	r.mu.Unlock()
}

// unownedSpans returns the parts of sp (a data span of r) that no other
// initialized replica of this store holds. A removed replica may carry a
// stale, wider descriptor (it never applied a split its range made), and
// must not delete the data of a range that now owns part of its old span.
// The snapshot overlap check (checkSnapshotOverlap) keeps such a range from
// arriving while r exists; this is the second line of defence. Data left
// behind is harmless: a snapshot clears its range's span before writing.
func (s *Store) unownedSpans(r *Replica, sp keys.Span) []keys.Span {
	var owned []keys.Span
	for _, o := range s.Replicas() {
		if o == r {
			continue
		}
		od := o.Descriptor()
		if od == nil || len(od.GetReplicas()) == 0 {
			continue // not initialized: holds no data
		}
		os := keys.DataSpan(od)
		if bytes.Compare(os.Start, sp.End) < 0 && bytes.Compare(sp.Start, os.End) < 0 {
			owned = append(owned, os)
		}
	}
	return carveSpans(sp, owned)
}

// carveSpans returns the parts of sp that none of owned covers, in order.
func carveSpans(sp keys.Span, owned []keys.Span) []keys.Span {
	owned = slices.Clone(owned)
	sort.Slice(owned, func(i, j int) bool { return bytes.Compare(owned[i].Start, owned[j].Start) < 0 })
	var out []keys.Span
	at := sp.Start
	for _, os := range owned {
		if bytes.Compare(at, os.Start) < 0 {
			out = append(out, keys.Span{Start: at, End: os.Start})
		}
		if bytes.Compare(at, os.End) < 0 {
			at = os.End
		}
	}
	if bytes.Compare(at, sp.End) < 0 {
		out = append(out, keys.Span{Start: at, End: sp.End})
	}
	return out
}

// resolve maps a node ID to its address: the addresses given at start,
// then meta's node registry.
func (s *Store) resolve(nodeID uint64) (string, error) {
	s.peers.RLock()
	a, ok := s.peers.addrs[nodeID]
	s.peers.RUnlock()
	if ok {
		return a, nil
	}
	if _, err := s.Replica(keys.MetaRangeID); err == nil {
		nodes, err := s.cfg.StateMachines.Meta().Nodes()
		if err != nil {
			return "", err
		}
		for _, n := range nodes {
			if n.GetNodeId() == nodeID {
				return n.GetAddress(), nil
			}
		}
	}
	return "", fmt.Errorf("raft: no address known for node %d", nodeID)
}

// tickLoop ticks every replica every TickInterval.
func (s *Store) tickLoop() {
	defer s.wg.Done()
	t := s.cfg.Clock.NewTicker(s.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stopped:
			return
		case <-t.C():
		}
		s.tickReplicas()
	}
}

// tickReplicas gives every awake replica one tick, sends this node's
// heartbeats, and wakes the quiescent followers whose leader's node is no
// longer live (liveness.go, quiesce.go). A quiescent replica costs a
// flag test here and nothing else.
func (s *Store) tickReplicas() {
	t := &s.tick
	t.mu.Lock()
	defer t.mu.Unlock()
	tick := s.ticks.Add(1)
	now := s.now()
	s.noteTickTimeLocked(now)
	s.observeLogWrite(now) // before the replicas ask DiskStalled
	peers := s.heartbeatPeersLocked()
	s.sendNodeHeartbeats(peers, tick)
	dead := s.noteSilencesLocked(peers)
	if len(dead) > 0 {
		// Sleeping replicas whose leader's node went silent wake to
		// campaign: look at every replica, not only the awake ones.
		s.allReplicasLocked()
		for _, r := range t.reps {
			if r.asleep.Load() && dead[r.sleepLeaderNode.Load()] {
				r.in.Lock()
				r.in.leaderDead = true
				r.in.Unlock()
				s.sched.enqueue(r)
			}
		}
	}
	s.awake.Lock()
	t.reps = t.reps[:0]
	for r := range s.awake.reps {
		t.reps = append(t.reps, r)
	}
	s.awake.Unlock()
	for _, r := range t.reps {
		if r.asleep.Load() {
			continue // going to sleep as the set was read
		}
		r.in.Lock()
		r.in.ticks++
		n := r.in.ticks
		r.in.Unlock()
		if len(dead) == 0 && n < followerTickBatch && r.followsLeader() {
			continue // counted: handed to Raft on its next visit (follower_ticks.go)
		}
		s.sched.enqueue(r)
	}
	clear(t.reps) // keeps no destroyed replica alive
}

// allReplicasLocked sets s.tick.reps to every replica of the store.
// REQUIRES: s.tick.mu.
func (s *Store) allReplicasLocked() {
	t := &s.tick
	s.mu.RLock()
	t.reps = t.reps[:0]
	for _, r := range s.mu.replicas {
		t.reps = append(t.reps, r)
	}
	s.mu.RUnlock()
}

// setAwake puts r into the set of replicas the ticker ticks, or takes it
// out. Callers that add or remove r in s.mu.replicas do it under s.mu in
// the same critical section.
func (s *Store) setAwake(r *Replica, awake bool) {
	s.awake.Lock()
	if awake {
		s.awake.reps[r] = struct{}{}
	} else {
		delete(s.awake.reps, r)
	}
	s.awake.Unlock()
}

// errFatal marks errors after which the node must not continue.
var errFatal = errors.New("raft: fatal")

// EntryCacheBytes returns the bytes the replicas' entry caches hold
// together, and their node-wide limit (Config.EntryCacheNodeBytes).
func (s *Store) EntryCacheBytes() (used, limit int64) {
	return s.entryCaches.Used(), s.entryCaches.Limit()
}

// NodeAddress returns the gRPC address of node nodeID as this node knows
// it (the addresses it started with, then meta's registry).
func (s *Store) NodeAddress(nodeID uint64) (string, error) { return s.resolve(nodeID) }
