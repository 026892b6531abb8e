package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
)

// flagTranscriptSeed replaces the seed of every transcript that does not
// pin its own (start seed=S): the outcomes such a transcript prints should
// not depend on it, only the order of the steps that lead to them.
var flagTranscriptSeed = flag.Uint64("transcript-seed", 0, "run every transcript with this seed instead of its own")

// TestTranscript runs the transcripts in testdata/transcript (the
// datadriven style of etcd-io/raft's testdata): scripted scenarios on the
// simulator, with a network that neither drops, duplicates nor delays
// (partitions are the only network faults), whose printed outcomes must
// match the expected output. Rewrite the expected output with
// `go test ./sim/ -run Transcript -rewrite`, and review the diff: a
// transcript whose output shows a bug is a bug report, not a test.
//
// Nodes are named by role, not by ID, wherever the script binds a name
// (leader as=L binds L to the leader and F1, F2, ... to the other voters
// in ID order), so that a transcript says what it means even if a change
// moves which node wins an election.
func TestTranscript(t *testing.T) {
	files, err := filepath.Glob("testdata/transcript/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cryptotest.SetGlobalRandom(t, 1)
			root := simDir(t)
			synctest.Test(t, func(t *testing.T) {
				h := &transcript{t: t, root: root}
				defer h.stop()
				datadriven.RunTest(t, path, h.cmd)
			})
		})
	}
}

// transcript is the state of one transcript file.
type transcript struct {
	t     *testing.T
	root  string
	runs  int
	s     *Sim
	names map[string]uint64
	bound []string // names bound by leader as=, in order
	ops   map[string]*tOp
	// valid is whether each node held a valid lease after the last
	// step; events lists the changes not yet printed; overlap: two
	// leases were seen at once.
	valid   map[uint64]bool
	events  []leaseEvent
	overlap bool
	// ranges names the ranges of the merge transcripts (left is the
	// first user range; split binds right); freezeIdx is the index of
	// the last freeze the script proposed.
	ranges    map[string]uint64
	freezeIdx uint64
}

// leaseEvent is a node's lease beginning or lapsing, or a broken lease
// invariant (bug). Names are resolved when it is printed, so that a lease
// that began while its leader was being elected is named after it.
type leaseEvent struct {
	node  uint64
	began bool
	bug   string
}

// tOp is a client call running on its own goroutine.
type tOp struct {
	desc   string
	done   chan string
	out    string
	cancel context.CancelFunc
}

func (h *transcript) stop() {
	if h.s == nil {
		return
	}
	for _, o := range h.ops {
		o.cancel()
	}
	h.s.shutdown()
	h.s = nil
}

func (h *transcript) cmd(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "start":
		return h.start(d)
	case "leader":
		return h.leader(d)
	case "run":
		h.runFor(h.dur(d, "d", 0))
		return h.notes() + "ok"
	case "isolate":
		id := h.node(d, "node")
		for _, nd := range h.s.nodes {
			if nd.id != id {
				h.s.net.blocked[link{id, nd.id}] = true
				h.s.net.blocked[link{nd.id, id}] = true
			}
		}
		return "ok"
	case "heal":
		h.s.net.blocked = map[link]bool{}
		return "ok"
	case "propose":
		return h.start1(d, "propose", h.propose)
	case "read":
		return h.start1(d, "read", h.read)
	case "transfer":
		to := h.node(d, "to")
		return h.start1(d, "transfer", func(ctx context.Context, st *raft.Store, d *datadriven.TestData) string {
			if err := st.TransferLeader(ctx, keys.FirstUserRangeID, to); err != nil {
				return outcome(err)
			}
			return "transferred"
		})
	case "await":
		return h.await(d)
	case "lease-status":
		return h.leaseStatus(d)
	case "split", "hold", "release", "freeze", "merge-entry", "merge", "replicas":
		return h.mergeCmd(d) // transcript_merge_test.go
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
		return ""
	}
}

func (h *transcript) start(d *datadriven.TestData) string {
	h.stop()
	n := 3
	d.MaybeScanArgs(h.t, "n", &n)
	seed := uint64(1)
	if *flagTranscriptSeed != 0 {
		seed = *flagTranscriptSeed
	}
	// A transcript that pins its seed keeps it.
	d.MaybeScanArgs(h.t, "seed", &seed)
	var bug string
	d.MaybeScanArgs(h.t, "bug", &bug)
	planted, ok := bugs[bug]
	if !ok && bug != "" {
		d.Fatalf(h.t, "unknown bug %q", bug)
	}
	h.runs++
	root := filepath.Join(h.root, fmt.Sprint("run", h.runs))
	if err := os.MkdirAll(root, 0o755); err != nil {
		d.Fatalf(h.t, "%v", err)
	}
	h.s = newSim(h.t, Options{Seed: seed, Nodes: n, Bug: planted}, root)
	h.names = map[string]uint64{}
	h.bound = nil
	h.ops = map[string]*tOp{}
	h.valid = map[uint64]bool{}
	h.events, h.overlap = nil, false
	h.ranges = map[string]uint64{"left": keys.FirstUserRangeID}
	h.freezeIdx = 0
	h.s.steadyDisk = true
	h.s.holds = &applyHolds{held: map[replicaKey]bool{}}
	h.s.bootstrap()
	return fmt.Sprintf("started %d voters", n)
}

// status is node id's view of the first user range (where the
// transcripts' keys live until they split it).
func (h *transcript) status(id uint64) (raft.RaftStatus, bool) {
	return h.rangeStatus(id, keys.FirstUserRangeID)
}

// rangeStatus is node id's view of range rangeID.
func (h *transcript) rangeStatus(id, rangeID uint64) (raft.RaftStatus, bool) {
	st := h.s.node(id).storeIfUp()
	if st == nil {
		return raft.RaftStatus{}, false
	}
	r, err := st.Replica(rangeID)
	if err != nil {
		return raft.RaftStatus{}, false
	}
	return r.Status(), true
}

// leader runs until a node other than those named by not= leads the
// first user range and has applied the entries of its log, and binds as= (L) to it and, the first time, F1, F2,
// ... to the other voters in ID order.
func (h *transcript) leader(d *datadriven.TestData) string {
	var not []string
	if d.HasArg("not") {
		d.ScanArgs(h.t, "not", &not)
	}
	excluded := map[uint64]bool{}
	for _, n := range not {
		excluded[h.lookup(n)] = true
	}
	var found uint64
	h.until(10*time.Second, func() bool {
		for _, nd := range h.s.nodes[:h.s.opts.Nodes] {
			if excluded[nd.id] {
				continue
			}
			// Its own empty entry (the last in its log at election)
			// applied: a leader may use a lease only from then on.
			if st, ok := h.status(nd.id); ok && st.State == "leader" && st.Applied >= st.LastIndex {
				found = nd.id
				return true
			}
		}
		return false
	})
	if found == 0 {
		return h.notes() + "no leader within 10s"
	}
	as := "L"
	d.MaybeScanArgs(h.t, "as", &as)
	h.names[as] = found
	h.bound = append(h.bound, as)
	if len(not) == 0 {
		f := 0
		for _, nd := range h.s.nodes[:h.s.opts.Nodes] {
			if nd.id != found {
				f++
				h.names[fmt.Sprint("F", f)] = nd.id
			}
		}
	}
	return h.notes() + as + " leads"
}

// until runs the simulator until cond holds or maxD of simulated time passed.
// After every step it notes the named nodes whose lease lapsed or began,
// and any moment at which two nodes held a valid lease at once, or a
// lease of one term was valid while a later term had a leader (either
// would let a stale read be served: a bug).
func (h *transcript) until(maxD time.Duration, cond func() bool) {
	limit := h.s.clock.Now().Add(maxD)
	h.s.loop(func() bool {
		var holders []uint64
		var leaseTerm, leaderTerm uint64
		for _, nd := range h.s.nodes {
			st, _ := h.status(nd.id)
			if st.LeaseValid {
				holders = append(holders, nd.id)
				leaseTerm = st.Term
			}
			if st.State == "leader" {
				leaderTerm = max(leaderTerm, st.Term)
			}
			if was := h.valid[nd.id]; was != st.LeaseValid {
				h.valid[nd.id] = st.LeaseValid
				h.events = append(h.events, leaseEvent{node: nd.id, began: st.LeaseValid})
			}
		}
		if len(holders) > 1 && !h.overlap {
			h.overlap = true
			h.events = append(h.events, leaseEvent{bug: fmt.Sprintf("BUG: %d nodes hold a valid lease at once", len(holders))})
		}
		if len(holders) == 1 && leaderTerm > leaseTerm && !h.overlap {
			h.overlap = true
			h.events = append(h.events, leaseEvent{bug: "BUG: a lease of an old term is valid while a later term has a leader"})
		}
		return cond() || !h.s.clock.Now().Before(limit)
	})
}

// notes returns (and forgets) the lease events seen since the last
// command, one per line, in the order they happened (before the
// command's own outcome, which came last).
func (h *transcript) notes() string {
	var b strings.Builder
	for _, e := range h.events {
		switch name := h.nameOf(e.node); {
		case e.bug != "":
			b.WriteString(e.bug + "\n")
		case name == "":
			// A node the script does not name (the spare).
		case e.began:
			b.WriteString(name + "'s lease began\n")
		default:
			b.WriteString(name + "'s lease lapsed\n")
		}
	}
	h.events = nil
	return b.String()
}

// nameOf is the name last bound to node id by leader as=, else its
// follower name, else "".
func (h *transcript) nameOf(id uint64) string {
	for i := len(h.bound) - 1; i >= 0; i-- {
		if h.names[h.bound[i]] == id {
			return h.bound[i]
		}
	}
	for n, v := range h.names {
		if v == id {
			return n
		}
	}
	return ""
}

func (h *transcript) runFor(d time.Duration) {
	h.until(d, func() bool { return false })
}

func (h *transcript) leaseStatus(d *datadriven.TestData) string {
	id := h.node(d, "node")
	st, ok := h.status(id)
	if !ok {
		return "down"
	}
	lease := "no lease"
	if st.LeaseValid {
		lease = "lease valid"
	}
	return fmt.Sprintf("%s, %s", st.State, lease)
}

func (h *transcript) lookup(name string) uint64 {
	if id, ok := h.names[name]; ok {
		return id
	}
	var id uint64
	if _, err := fmt.Sscanf(name, "n%d", &id); err != nil || h.s.node(id) == nil {
		h.t.Fatalf("unknown node %q", name)
	}
	return id
}

func (h *transcript) node(d *datadriven.TestData, arg string) uint64 {
	var name string
	d.ScanArgs(h.t, arg, &name)
	return h.lookup(name)
}

func (h *transcript) dur(d *datadriven.TestData, arg string, def time.Duration) time.Duration {
	if !d.HasArg(arg) {
		return def
	}
	var s string
	d.ScanArgs(h.t, arg, &s)
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(h.t, "%s: %v", arg, err)
	}
	return v
}

// start1 starts a client call on node=, with a deadline of timeout= (on
// the simulated clock; none by default), and runs the simulator for up to
// wait= (1s) for it: it prints the outcome, or "pending" (await as= later).
func (h *transcript) start1(d *datadriven.TestData, kind string, fn func(ctx context.Context, st *raft.Store, d *datadriven.TestData) string) string {
	return h.start1At(d, h.s.node(h.node(d, "node")), kind, fn)
}

// start1At starts a client call on node nd (start1 on node=).
func (h *transcript) start1At(d *datadriven.TestData, nd *node, kind string, fn func(ctx context.Context, st *raft.Store, d *datadriven.TestData) string) string {
	if !nd.up {
		return "node down"
	}
	ctx, cancel := context.WithCancel(context.Background())
	if to := h.dur(d, "timeout", 0); to > 0 {
		h.s.clock.AfterFunc(to, cancel)
	}
	o := &tOp{desc: kind, done: make(chan string, 1), cancel: cancel}
	as := kind
	d.MaybeScanArgs(h.t, "as", &as)
	h.ops[as] = o
	st := nd.store
	go func() { o.done <- fn(ctx, st, d) }()
	h.s.settle()
	return h.wait(o, h.dur(d, "wait", time.Second))
}

func (h *transcript) wait(o *tOp, max time.Duration) string {
	take := func() bool {
		if o.out != "" {
			return true
		}
		select {
		case o.out = <-o.done:
			return true
		default:
			return false
		}
	}
	h.until(max, take)
	if !take() {
		return h.notes() + "pending"
	}
	return h.notes() + o.out
}

func (h *transcript) await(d *datadriven.TestData) string {
	var as string
	d.ScanArgs(h.t, "op", &as)
	o, ok := h.ops[as]
	if !ok {
		d.Fatalf(h.t, "no op %q", as)
	}
	return h.wait(o, h.dur(d, "max", 5*time.Second))
}

var transcriptClient uint64 = 5000

func (h *transcript) propose(ctx context.Context, st *raft.Store, d *datadriven.TestData) string {
	var key, value string
	d.ScanArgs(h.t, "key", &key)
	d.ScanArgs(h.t, "value", &value)
	r, err := st.ReplicaForKey([]byte(key))
	if err != nil {
		return outcome(err)
	}
	transcriptClient++
	cmd := &command.Command{Header: command.Header{ClientID: transcriptClient, RequestSeq: 1}}
	cmd.Kind = command.KindPut
	cmd.Mutations = []command.Mutation{{Kind: command.KindPut, Key: []byte(key), Value: []byte(value)}}
	res, _, err := st.Propose(ctx, r.RangeID(), cmd)
	if err == nil && res.Err() != nil {
		return "rejected: " + res.Err().Error()
	}
	return outcome(err)
}

func (h *transcript) read(ctx context.Context, st *raft.Store, d *datadriven.TestData) string {
	var key string
	d.ScanArgs(h.t, "key", &key)
	r, err := st.ReplicaForKey([]byte(key))
	if err != nil {
		return outcome(err)
	}
	if _, err := r.ReadBarrier(ctx); err != nil {
		return "read " + outcome(err)
	}
	ts := r.StateMachine().(*rangesm.Range).MVCCState().Frontier
	db := h.s.node(st.NodeID()).db
	kv, found, err := rangesm.NewReader(db).Get([]byte(key), ts)
	if err != nil {
		return "read error: " + err.Error()
	}
	if !found {
		return fmt.Sprintf("read served: %s absent", key)
	}
	return fmt.Sprintf("read served: %s=%s", key, kv.Value)
}

// outcome classifies a call's error as the client contract does.
func outcome(err error) string {
	switch {
	case err == nil:
		return "applied"
	case errors.Is(err, raft.ErrAmbiguous):
		return "ambiguous (may or may not apply)"
	case errors.Is(err, raft.ErrNotLeader):
		return "refused: not leader (definitely not applied)"
	case errors.Is(err, raft.ErrUnavailable):
		return "refused: unavailable (definitely not applied)"
	default:
		return "error: " + err.Error()
	}
}
