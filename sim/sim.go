package sim

import (
	"context"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
)

// Options configure one simulated run.
type Options struct {
	// Seed drives everything the run decides.
	Seed uint64
	// Nodes is the number of nodes bootstrapped together (0: five for
	// one seed in three, else three); one more node starts empty, for
	// membership changes.
	Nodes int
	// Duration is the simulated time of the faulty workload phase (3 s);
	// a quiet phase with final reads follows.
	Duration time.Duration
	// Bug plants a bug in the replication layer (raft.TestingKnobs).
	Bug raft.PlantedBug
	// Log, if set, receives the nodes' log (warnings and up) and the
	// simulator's trace lines; without it no trace is built (a seed
	// costs less) and Result.TraceHash is zero.
	Log io.Writer
}

func (o *Options) setDefaults() {
	if o.Nodes <= 0 {
		o.Nodes = 3
		if o.Seed%3 == 0 {
			o.Nodes = 5
		}
	}
	if o.Duration <= 0 {
		o.Duration = 3 * time.Second
	}
}

// Result is what one run saw.
type Result struct {
	Seed uint64
	// TraceHash is a hash of every step the run took, every message it
	// delivered and every outcome it recorded: two runs of one seed must
	// give the same. Only a run with a Log builds its trace (zero
	// otherwise).
	TraceHash uint64
	Steps     int
	// Ops counts client operations by outcome.
	OpsOK, OpsFailed, OpsUnknown int
	// Admin counts administrative operations (splits, merges, membership
	// changes, leader transfers) that succeeded, of AdminTried.
	Admin, AdminTried int
	// Crashes counts node crashes.
	Crashes int
	// Quiesces and Wakes count the times replicas put their range to
	// rest and woke up (raft/quiesce.go).
	Quiesces, Wakes int
	// Violations lists every invariant the run found broken.
	Violations []string
}

// Timing of the simulated cluster.
const (
	tickInterval  = 10 * time.Millisecond
	electionTicks = 10
)

// Run runs one seed inside a synctest bubble (so that it can wait for the
// goroutines it wakes to block again) with crypto/rand made deterministic
// (etcd-io/raft draws its election timeouts from it). t must not be
// parallel.
func Run(t *testing.T, opts Options) Result {
	opts.setDefaults()
	cryptotest.SetGlobalRandom(t, opts.Seed)
	root := simDir(t)
	var res Result
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, opts, root)
		res = s.run()
	})
	return res
}

// simDir is where the nodes' engines live: memory-backed when the machine
// has /dev/shm, since every log write syncs.
func simDir(t *testing.T) string {
	if d := os.Getenv("SHALE_SIM_DIR"); d != "" {
		return mkTemp(t, d)
	}
	if runtime.GOOS == "linux" {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			return mkTemp(t, "/dev/shm")
		}
	}
	return t.TempDir()
}

func mkTemp(t *testing.T, parent string) string {
	d, err := os.MkdirTemp(parent, "shale-sim-")
	if err != nil {
		t.Fatalf("sim: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// node is one simulated node.
type node struct {
	id    uint64
	dir   string
	db    *storage.DB
	store *raft.Store
	tr    *simTransport
	up    bool
	// diskReady is when the log write queued now completes (zero: none
	// queued yet): the simulated fsync latency.
	diskReady time.Time
	// pausedUntil: the node is paused (a stopped process, a long GC
	// pause, a VM migration) until then: it runs no round, log write or
	// tick, and what reaches it waits.
	pausedUntil time.Time
	held        map[uint64][]sendReq // by sender, while paused
}

// afterPause draws when something that waited for nd's pause is taken up:
// within 2 ms of its end, in no particular order.
func (s *Sim) afterPause(nd *node) time.Time {
	return nd.pausedUntil.Add(time.Duration(s.rng.Int64N(int64(2 * time.Millisecond))))
}

// paused reports whether nd is paused now.
func (s *Sim) paused(nd *node) bool { return s.clock.Now().Before(nd.pausedUntil) }

// event is something the simulator does at a simulated time.
type event struct {
	at   time.Time
	seq  uint64
	what string
	fn   func()
}

// Sim is the state of one run: the nodes, the network, the pending
// events, the workload and the checkers. Run makes one.
type Sim struct {
	t      *testing.T
	opts   Options
	root   string
	rng    *rand.Rand
	clock  *Clock
	net    *network
	nodes  []*node
	events []*event
	seq    uint64
	trace  hash.Hash64
	logger *slog.Logger
	res    Result
	end    time.Time // end of the faulty phase

	wl      *workload
	checker *checker

	// steadyDisk: no fsync stalls (the transcripts' runs, whose only
	// faults are the ones their script asks for).
	steadyDisk bool
	// holds, when not nil, are the replicas whose apply a transcript
	// holds back (raft.TestingKnobs.HoldApply); set before bootstrap.
	holds *applyHolds
}

// applyHolds are the replicas (node, range) whose committed entries may
// not apply yet.
type applyHolds struct {
	mu   sync.Mutex
	held map[replicaKey]bool
}

func (h *applyHolds) set(k replicaKey, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if on {
		h.held[k] = true
	} else {
		delete(h.held, k)
	}
}

func (h *applyHolds) holds(nodeID, rangeID uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[replicaKey{nodeID, rangeID}]
}

func newSim(t *testing.T, opts Options, root string) *Sim {
	s := &Sim{
		t: t, opts: opts, root: root,
		rng:   rand.New(rand.NewPCG(opts.Seed, 0x5ea1e)),
		clock: NewClock(),
		net:   newNetwork(),
		trace: fnv.New64a(),
	}
	s.res.Seed = opts.Seed
	w := io.Discard
	if opts.Log != nil {
		w = opts.Log
	}
	s.logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s.checker = newChecker(s)
	s.wl = newWorkload(s)
	return s
}

// tracef adds a line to the trace and the log (when there is a log: the
// trace is built only then).
func (s *Sim) tracef(format string, args ...any) {
	if s.opts.Log == nil {
		return
	}
	line := fmt.Sprintf("%d ", s.clock.Now().Sub(epoch).Microseconds()) + fmt.Sprintf(format, args...) + "\n"
	io.WriteString(s.trace, line)
	io.WriteString(s.opts.Log, line)
}

// whatf names a step for the trace ("" when there is no trace, since the
// name would not be used).
func (s *Sim) whatf(format string, args ...any) string {
	if s.opts.Log == nil {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

// violate records a broken invariant.
func (s *Sim) violate(format string, args ...any) {
	v := fmt.Sprintf("at %v: ", s.clock.Now().Sub(epoch)) + fmt.Sprintf(format, args...)
	s.tracef("VIOLATION %s", v)
	s.res.Violations = append(s.res.Violations, v)
}

// errAbort stops a run after a fatal node error.
type errAbort struct{ msg string }

func (s *Sim) run() (res Result) {
	defer func() {
		if p := recover(); p != nil {
			if a, ok := p.(errAbort); ok {
				s.violate("%s", a.msg)
			} else {
				s.violate("panic: %v", p)
			}
		}
		s.shutdown()
		s.res.TraceHash = s.trace.Sum64()
		res = s.res
	}()
	s.bootstrap()
	s.end = epoch.Add(s.opts.Duration)
	s.wl.start()
	s.loop(func() bool { return !s.clock.Now().Before(s.end) })
	// Quiet phase: the network heals, every node comes back, and the
	// final reads run once the cluster has settled.
	s.healAll()
	settle := s.clock.Now().Add(2 * time.Second)
	s.loop(func() bool { return !s.clock.Now().Before(settle) })
	s.wl.finalReads()
	limit := s.clock.Now().Add(10 * time.Second)
	s.loop(func() bool { return s.wl.idle() || !s.clock.Now().Before(limit) })
	if !s.wl.idle() {
		s.violate("client operations still pending 10 s after the final reads began")
	}
	s.checker.checkReplicas(true)
	s.checker.checkHistory()
	return
}

// bootstrap creates the nodes: 1..Nodes bootstrapped as the initial
// cluster, one more joining empty.
func (s *Sim) bootstrap() {
	n := s.opts.Nodes
	var descs []*kvpb.NodeDescriptor
	for i := 1; i <= n; i++ {
		descs = append(descs, &kvpb.NodeDescriptor{NodeId: uint64(i), Address: fmt.Sprintf("sim-node-%d", i)})
	}
	for i := 1; i <= n+1; i++ {
		nd := &node{id: uint64(i), dir: filepath.Join(s.root, fmt.Sprint("n", i))}
		db := s.openDB(nd)
		var err error
		if i <= n {
			err = raft.Bootstrap(db, "sim", nd.id, descs)
		} else {
			err = raft.WriteStoreIdent(db, raft.StoreIdent{ClusterID: "sim", NodeID: nd.id})
		}
		if err != nil {
			s.t.Fatalf("sim: bootstrapping node %d: %v", i, err)
		}
		nd.db = db
		s.nodes = append(s.nodes, nd)
	}
	for _, nd := range s.nodes {
		s.startNode(nd)
	}
	for _, nd := range s.nodes {
		// Each node ticks on its own phase.
		s.scheduleTick(nd, s.clock.Now().Add(time.Duration(s.rng.Int64N(int64(tickInterval)))))
	}
}

func (s *Sim) openDB(nd *node) *storage.DB {
	db, err := storage.Open(nd.dir, keys.WithUserVersions(&storage.Options{WriteBufferSize: 4 << 20}))
	if err != nil {
		s.t.Fatalf("sim: opening node %d's engine: %v", nd.id, err)
	}
	return db
}

func (s *Sim) startNode(nd *node) {
	if nd.db == nil {
		nd.db = s.openDB(nd)
	}
	sms, err := rangesm.NewFactory(rangesm.Config{Engine: nd.db, Logger: s.logger.With("node", nd.id)})
	if err != nil {
		s.t.Fatalf("sim: node %d: %v", nd.id, err)
	}
	cfg := raft.Config{
		Engine: nd.db, StateMachines: sms, NodeID: nd.id, ClusterID: "sim",
		Clock:          s.clock,
		Manual:         true,
		TickInterval:   tickInterval,
		ElectionTicks:  electionTicks,
		HeartbeatTicks: 1,
		Logger:         s.logger.With("node", nd.id),
		AppliedWaiter:  appliedWaiter{s},
		Testing:        raft.TestingKnobs{Bug: s.opts.Bug, OnApply: s.checker.onApply},
		Fatal: func(msg string, err error) {
			panic(errAbort{fmt.Sprintf("node %d fatal: %s: %v", nd.id, msg, err)})
		},
	}
	if s.holds != nil {
		cfg.Testing.HoldApply = s.holds.holds
	}
	cfg.NewTransport = func(h raft.TransportHandlers) (raft.Transport, error) {
		nd.tr = &simTransport{net: s.net, node: nd.id, h: h}
		return nd.tr, nil
	}
	st, err := raft.NewStore(cfg)
	if err != nil {
		s.t.Fatalf("sim: node %d: %v", nd.id, err)
	}
	nd.store = st
	nd.up = true
	nd.diskReady, nd.pausedUntil, nd.held = time.Time{}, time.Time{}, nil
	s.checker.nodeStarted(nd)
	st.Start()
	s.tracef("start n%d", nd.id)
	s.settle()
}

// crash stops node nd as a power loss would: the log writes it queued
// and did not write are lost; what it wrote stays.
func (s *Sim) crash(nd *node) {
	if !nd.up {
		return
	}
	s.tracef("crash n%d (log write pending: %v)", nd.id, nd.store.LogWritePending())
	s.res.Crashes++
	nd.up = false
	s.countRests(nd)
	nd.store.Stop()
	synctest.Wait()
	if err := nd.db.Close(); err != nil {
		s.violate("node %d: closing its engine: %v", nd.id, err)
	}
	nd.db, nd.store = nil, nil
	s.settle()
}

func (s *Sim) shutdown() {
	for _, nd := range s.nodes {
		if nd.up {
			nd.up = false
			s.countRests(nd)
			nd.store.Stop()
		}
	}
	s.wl.cancelAll()
	synctest.Wait()
	for _, nd := range s.nodes {
		if nd.db != nil {
			nd.db.Close()
			nd.db = nil
		}
	}
}

// countRests adds what nd's store counted of quiescence to the result.
func (s *Sim) countRests(nd *node) {
	q, w := nd.store.Metrics().Rests()
	s.res.Quiesces += q
	s.res.Wakes += w
}

func (s *Sim) node(id uint64) *node {
	if id == 0 || int(id) > len(s.nodes) {
		return nil
	}
	return s.nodes[id-1]
}

// schedule adds an event at time at.
func (s *Sim) schedule(at time.Time, what string, fn func()) {
	s.seq++
	// Kept in order of time, then of scheduling: a new event goes after
	// every event due at or before its time.
	i := sort.Search(len(s.events), func(j int) bool { return s.events[j].at.After(at) })
	s.events = slices.Insert(s.events, i, &event{at: at, seq: s.seq, what: what, fn: fn})
}

func (s *Sim) scheduleTick(nd *node, at time.Time) {
	s.schedule(at, "", func() {
		if nd.up && !s.paused(nd) {
			nd.store.Tick()
		}
		s.scheduleTick(nd, at.Add(tickInterval))
	})
}

// action is one thing the simulator may do now.
type action struct {
	what string
	fn   func()
}

// enabled lists what may happen at the current time: a round on a node
// with queued replicas, a log write whose simulated fsync has completed,
// and every event that has fallen due.
func (s *Sim) enabled() []action {
	now := s.clock.Now()
	var acts []action
	for _, nd := range s.nodes {
		if !nd.up || s.paused(nd) {
			continue
		}
		nd := nd
		if nd.store.RoundPending() {
			acts = append(acts, action{s.whatf("round n%d", nd.id), func() { nd.store.StepRound() }})
		}
		if nd.store.LogWritePending() {
			if nd.diskReady.IsZero() {
				nd.diskReady = now.Add(s.fsyncLatency())
			}
			if !nd.diskReady.After(now) {
				acts = append(acts, action{s.whatf("logwrite n%d", nd.id), func() {
					nd.diskReady = time.Time{}
					nd.store.StepLogWrite()
				}})
			}
		}
	}
	for i, e := range s.events {
		if e.at.After(now) {
			break
		}
		i, e := i, e
		acts = append(acts, action{e.what, func() {
			s.events = slices.Delete(s.events, i, i+1)
			e.fn()
		}})
	}
	return acts
}

// fsyncLatency draws how long a log write takes: mostly a millisecond or
// two, sometimes a stall (never on a steady disk).
func (s *Sim) fsyncLatency() time.Duration {
	if s.rng.Float64() < 0.02 && !s.steadyDisk {
		return 20*time.Millisecond + time.Duration(s.rng.Int64N(int64(100*time.Millisecond)))
	}
	return time.Duration(s.rng.Int64N(int64(2 * time.Millisecond)))
}

// loop runs steps until done reports true.
func (s *Sim) loop(done func() bool) {
	for !done() {
		acts := s.enabled()
		if len(acts) > 0 {
			a := acts[s.rng.IntN(len(acts))]
			if a.what != "" {
				s.tracef("%s", a.what)
			}
			a.fn()
			s.settle()
			s.res.Steps++
			s.checker.afterStep()
			continue
		}
		// Nothing to do now: move to the next timer, fsync or event.
		next, ok := s.nextTime()
		if t, tok := s.clock.NextTimer(); tok && (!ok || !t.After(next)) {
			s.clock.FireNext()
			s.settle()
			continue
		}
		if !ok {
			s.violate("the simulation has nothing left to do")
			return
		}
		s.clock.Advance(next)
	}
}

func (s *Sim) nextTime() (time.Time, bool) {
	var next time.Time
	ok := false
	consider := func(t time.Time) {
		if !ok || t.Before(next) {
			next, ok = t, true
		}
	}
	if len(s.events) > 0 {
		consider(s.events[0].at)
	}
	for _, nd := range s.nodes {
		if nd.up && !nd.diskReady.IsZero() {
			consider(later(nd.diskReady, nd.pausedUntil))
		}
		if nd.up && s.paused(nd) {
			consider(nd.pausedUntil)
		}
	}
	return next, ok
}

// settle lets every goroutine woken by the last step run until it blocks,
// then posts what the transports queued and collects what the clients
// finished.
func (s *Sim) settle() {
	for {
		synctest.Wait()
		reqs := s.net.drain()
		s.deliverLater(reqs)
		if !s.wl.collect() {
			return
		}
	}
}

// appliedWaiter is the AppliedWaiter merges need (the node layer's asks
// other nodes over gRPC; here the simulator asks their stores).
type appliedWaiter struct{ s *Sim }

func (w appliedWaiter) WaitApplied(ctx context.Context, desc *kvpb.RangeDescriptor, index uint64) error {
	for {
		ok := true
		for _, rd := range desc.GetReplicas() {
			nd := w.s.node(rd.GetNodeId())
			st := nd.storeIfUp()
			if st == nil {
				ok = false
				break
			}
			r, err := st.Replica(desc.GetRangeId())
			if err != nil || r.AppliedIndex() < index {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for range %d to apply %d everywhere: %w", desc.GetRangeId(), index, ctx.Err())
		case <-w.s.clock.After(5 * time.Millisecond):
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
