package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// A fault is one nemesis action in progress: heal ends it (heals the
// network, restarts or resumes processes, stops a storm).
type fault interface {
	heal(r *run) error
}

// nemesis injects one kind of fault. inject starts it and describes what it
// did; hold is how long the schedule keeps it active.
type nemesis struct {
	name string
	// unavailable says why the nemesis cannot run here, or "".
	unavailable func(r *run) string
	inject      func(r *run, rng *rand.Rand) (fault, string, error)
	holdMin     time.Duration
	holdMax     time.Duration
	// slowsOps: the fault slows operations down instead of failing them,
	// so a run of it has few operations while the fault holds and many in
	// the gaps; its validity then counts the share of the operations'
	// time in flight that overlapped a fault, not the share of operations
	// (docs/testing.md, "Validity").
	slowsOps bool
	// smallDisks: the run's cluster gives every node a small file
	// system of its own (nemesis_fulldisk_test.go).
	smallDisks bool
	// nodeFlags are given to every node of the run's cluster.
	nodeFlags []string
	// valid, if set, says why a finished run proved nothing ("" if it
	// did), beyond the checks every run gets.
	valid func(r *run) string
}

// nemeses is every nemesis, in the order the report lists them.
var nemeses = []*nemesis{
	// Requests routed to the isolated leader hang until it steps down
	// (CheckQuorum, an election timeout) or the client moves on, so it
	// slows operations like the pause: a `make test` run had 19% of its
	// operations and 84% of their time in flight under the isolation.
	{name: "partition-leader", unavailable: needNet, inject: partitionLeader, holdMin: 3 * time.Second, holdMax: 8 * time.Second, slowsOps: true},
	{name: "partition-halves", unavailable: needNet, inject: partitionHalves, holdMin: 3 * time.Second, holdMax: 8 * time.Second},
	{name: "partition-bridge", unavailable: needNet, inject: partitionBridge, holdMin: 3 * time.Second, holdMax: 8 * time.Second},
	{name: "loss-oneway", unavailable: needNet, inject: lossOneWay, holdMin: 3 * time.Second, holdMax: 8 * time.Second},
	{name: "kill", inject: killNodes, holdMin: time.Second, holdMax: 5 * time.Second},
	// A pause longer than the election timeout: the others elect a new
	// leader while the paused one still believes it leads. Requests to the
	// paused node hang rather than fail, so it slows operations.
	{name: "pause", inject: pauseNode, holdMin: 2 * electionTimeout, holdMax: 5 * electionTimeout, slowsOps: true},
	{name: "transfer-storm", inject: transferStorm, holdMin: 3 * time.Second, holdMax: 8 * time.Second},
	{name: "split-merge-storm", unavailable: needSplit, inject: splitMergeStorm, holdMin: 3 * time.Second, holdMax: 8 * time.Second},
	{name: "merge-kill", unavailable: needSplit, inject: mergeKill, holdMin: 3 * time.Second, holdMax: 8 * time.Second},
	{name: "membership", inject: changeMembership, holdMin: 2 * time.Second, holdMax: 5 * time.Second},
	{name: "slow-disk", unavailable: needSlowDisk, inject: slowDisk, holdMin: 3 * time.Second, holdMax: 8 * time.Second, slowsOps: true},
	{name: "clock-skew", unavailable: needClockHook, inject: clockSkew, holdMin: clockSkewHoldMin, holdMax: 8 * time.Second},
	{name: "full-disk", unavailable: needSmallDisks, inject: fullDisk, holdMin: 3 * time.Second, holdMax: 8 * time.Second, smallDisks: true},
	{name: "gc-split-merge", unavailable: needSplit, inject: gcSplitMerge, holdMin: 3 * time.Second, holdMax: 8 * time.Second, nodeFlags: gcFlags, valid: gcCollected},
}

// combined is the nemesis that runs two of the others at once, chosen at
// random each cycle.
var combined = &nemesis{name: "combined", inject: injectCombined, holdMin: 3 * time.Second, holdMax: 8 * time.Second}

func nemesisByName(name string) *nemesis {
	if name == combined.name {
		return combined
	}
	for _, n := range nemeses {
		if n.name == name {
			return n
		}
	}
	return nil
}

func needNet(r *run) string {
	if r.net == nil {
		return r.netErr
	}
	return ""
}

// needSplit probes the admin Split RPC: until sharding lands it answers
// Unimplemented.
func needSplit(r *run) string {
	nd := r.c.nodes(false)[0]
	admin, done, err := nd.admin()
	if err != nil {
		return err.Error()
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = admin.Split(ctx, &kvpb.SplitRequest{SplitKey: []byte("reg/")})
	if status.Code(err) == codes.Unimplemented {
		return "the admin Split RPC answers Unimplemented (sharding has not landed)"
	}
	return ""
}

// netFault heals by flushing every iptables rule.
type netFault struct{}

func (netFault) heal(r *run) error { return r.net.heal() }

func others(all []*node, except ...*node) []*node {
	var out []*node
	for _, nd := range all {
		skip := false
		for _, x := range except {
			skip = skip || x.id == nd.id
		}
		if !skip {
			out = append(out, nd)
		}
	}
	return out
}

// randomLeader returns the leader of a random range, or a random node when
// no leader answers.
func randomLeader(r *run, rng *rand.Rand) *node {
	ls := r.c.leaders(500 * time.Millisecond)
	ids := make([]uint64, 0, len(ls))
	for id := range ls {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if len(ids) > 0 {
		if nd := r.c.node(ls[ids[rng.IntN(len(ids))]].node); nd != nil && !nd.isRemoved() {
			return nd
		}
	}
	all := r.c.nodes(false)
	return all[rng.IntN(len(all))]
}

func shuffled(r *run, rng *rand.Rand) []*node {
	all := r.c.nodes(false)
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all
}

func names(ns []*node) string {
	var s []string
	for _, nd := range ns {
		s = append(s, fmt.Sprint("n", nd.id))
	}
	return "{" + strings.Join(s, ",") + "}"
}

// partitionLeader cuts a range's leader off from every other node.
func partitionLeader(r *run, rng *rand.Rand) (fault, string, error) {
	l := randomLeader(r, rng)
	rest := others(r.c.nodes(false), l)
	return netFault{}, fmt.Sprintf("isolate leader n%d from %s", l.id, names(rest)), r.net.cutBoth([]*node{l}, rest)
}

// partitionHalves splits the nodes into a random minority and majority.
func partitionHalves(r *run, rng *rand.Rand) (fault, string, error) {
	all := shuffled(r, rng)
	minority, majority := all[:len(all)/2], all[len(all)/2:]
	return netFault{}, fmt.Sprintf("minority %s | majority %s", names(minority), names(majority)), r.net.cutBoth(minority, majority)
}

// partitionBridge splits the nodes into two halves that cannot talk to
// each other but both talk to one node in the middle. Each half plus the
// bridge is a majority, so the leader keeps its quorum wherever it is; to
// make leadership move under the non-transitive partition, a range's
// leader is then asked to hand over to a node of the other half (from
// the bridge, to either half).
func partitionBridge(r *run, rng *rand.Rand) (fault, string, error) {
	all := shuffled(r, rng)
	h := (len(all) - 1) / 2
	a, bridge, b := all[:h], all[h], all[h+1:]
	desc := fmt.Sprintf("%s | bridge n%d | %s", names(a), bridge.id, names(b))
	if err := r.net.cutBoth(a, b); err != nil {
		return netFault{}, "", err
	}
	ls := r.c.leaders(500 * time.Millisecond)
	moved := 0
	for rangeID, li := range ls {
		var to []*node
		switch {
		case containsNode(a, li.node):
			to = b
		case containsNode(b, li.node):
			to = a
		default:
			// A new slice: a and b share all's array, and appending b
			// to a in place would overwrite the bridge and b itself.
			to = append(append([]*node(nil), a...), b...)
		}
		if len(to) == 0 {
			continue
		}
		target := to[rng.IntN(len(to))]
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := r.admin().TransferLeader(ctx, rangeID, target.id)
		cancel()
		if err == nil {
			moved++
			desc += fmt.Sprintf("; r%d n%d->n%d", rangeID, li.node, target.id)
		} else {
			desc += fmt.Sprintf("; r%d transfer to n%d: %v", rangeID, target.id, status.Code(err))
		}
	}
	return netFault{}, desc, nil
}

func containsNode(ns []*node, id uint64) bool {
	for _, nd := range ns {
		if nd.id == id {
			return true
		}
	}
	return false
}

// lossOneWay drops every packet one node (often a leader) sends to the
// others, while it still hears them.
func lossOneWay(r *run, rng *rand.Rand) (fault, string, error) {
	var x *node
	if rng.IntN(2) == 0 {
		x = randomLeader(r, rng)
	} else {
		all := r.c.nodes(false)
		x = all[rng.IntN(len(all))]
	}
	rest := others(r.c.nodes(false), x)
	for _, y := range rest {
		if err := r.net.drop(x.ip, y.ip); err != nil {
			return netFault{}, "", err
		}
	}
	return netFault{}, fmt.Sprintf("drop n%d -> %s", x.id, names(rest)), nil
}

// procFault restarts killed nodes or resumes paused ones.
type procFault struct {
	killed []*node
	paused []*node
}

func (f procFault) heal(r *run) error {
	var errs []error
	for _, nd := range f.paused {
		errs = append(errs, nd.resume())
	}
	for _, nd := range f.killed {
		if !nd.isRemoved() {
			errs = append(errs, r.c.start(nd.id))
		}
	}
	return errors.Join(errs...)
}

// killNodes SIGKILLs a minority (a leader half the time).
func killNodes(r *run, rng *rand.Rand) (fault, string, error) {
	all := shuffled(r, rng)
	n := 1 + rng.IntN(max(1, (len(all)-1)/2))
	victims := all[:n]
	if rng.IntN(2) == 0 {
		l := randomLeader(r, rng)
		victims = append([]*node{l}, others(all, l)[:n-1]...)
	}
	for _, nd := range victims {
		nd.kill()
	}
	return procFault{killed: victims}, "SIGKILL " + names(victims), nil
}

// pauseNode SIGSTOPs a leader (or, a third of the time, any node).
func pauseNode(r *run, rng *rand.Rand) (fault, string, error) {
	var nd *node
	if rng.IntN(3) == 0 {
		all := r.c.nodes(false)
		nd = all[rng.IntN(len(all))]
	} else {
		nd = randomLeader(r, rng)
	}
	if !nd.running() || nd.isPaused() {
		return procFault{}, fmt.Sprintf("n%d already down", nd.id), nil
	}
	return procFault{paused: []*node{nd}}, fmt.Sprintf("SIGSTOP n%d", nd.id), nd.pause()
}

// storm runs an action repeatedly in the background until healed.
type storm struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	ok     int
	idle   int // actions with nothing to do (errNothingToDo)
	errs   map[string]int
}

// errNothingToDo: a storm action found nothing to do (e.g. the range cap).
var errNothingToDo = errors.New("nothing to do")

func startStorm(every time.Duration, rng *rand.Rand, act func(ctx context.Context, rng *rand.Rand) error) *storm {
	ctx, cancel := context.WithCancel(context.Background())
	s := &storm{cancel: cancel, done: make(chan struct{}), errs: map[string]int{}}
	seed := rng.Uint64()
	go func() {
		defer close(s.done)
		rng := rand.New(rand.NewPCG(seed, 1))
		for ctx.Err() == nil {
			err := act(ctx, rng)
			s.mu.Lock()
			if err == nil {
				s.ok++
			} else if errors.Is(err, errNothingToDo) {
				s.idle++
			} else if ctx.Err() == nil {
				s.errs[status.Code(err).String()]++
			}
			s.mu.Unlock()
			pause(ctx, every/2+time.Duration(rng.Int64N(int64(every))))
		}
	}()
	return s
}

func (s *storm) heal(r *run) error {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	r.logf("  storm: %d actions succeeded, %d had nothing to do, failures by code %v", s.ok, s.idle, s.errs)
	return nil
}

// transferStorm moves leaderships around every ~200 ms.
func transferStorm(r *run, rng *rand.Rand) (fault, string, error) {
	s := startStorm(200*time.Millisecond, rng, func(ctx context.Context, rng *rand.Rand) error {
		ls := r.c.leaders(500 * time.Millisecond)
		if len(ls) == 0 {
			return errors.New("no leader answered")
		}
		ids := make([]uint64, 0, len(ls))
		for id := range ls {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		rangeID := ids[rng.IntN(len(ids))]
		all := r.c.nodes(false)
		target := all[rng.IntN(len(all))]
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return r.admin().TransferLeader(ctx, rangeID, target.id)
	})
	return s, "leader transfers every ~200ms", nil
}

// maxRanges caps the ranges the split/merge storm makes in one run while
// merges are unavailable: every range is a Raft group on every node, and
// this machine has two cores.
const maxRanges = 24

// splitKey returns a random point between or inside the register, set
// and consistent-scan workloads' keys (merging at it merges the range
// holding it with the next).
func splitKey(rng *rand.Rand) []byte {
	switch rng.IntN(3) {
	case 0:
		return fmt.Appendf(nil, "reg/%d/", rng.IntN(4))
	case 1:
		return fmt.Appendf(nil, "set/%02d/%07d", 6+rng.IntN(3), rng.IntN(20000))
	}
	return []byte(scanKey(rng.IntN(scanKeys)))
}

// splitMergeStorm splits and merges ranges every ~300 ms. While Merge
// answers Unimplemented it only splits, up to maxRanges ranges.
func splitMergeStorm(r *run, rng *rand.Rand) (fault, string, error) {
	s := startStorm(300*time.Millisecond, rng, func(ctx context.Context, rng *rand.Rand) error {
		all := r.c.nodes(false)
		nd := all[rng.IntN(len(all))]
		admin, done, err := nd.admin()
		if err != nil {
			return err
		}
		defer done()
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		r.mu.Lock()
		noMerge, ranges := r.noMerge, r.ranges
		r.mu.Unlock()
		if noMerge || rng.IntN(2) == 0 {
			if noMerge && ranges >= maxRanges {
				return errNothingToDo
			}
			_, err = admin.Split(ctx, &kvpb.SplitRequest{SplitKey: splitKey(rng)})
			if err == nil {
				r.mu.Lock()
				r.ranges++
				r.mu.Unlock()
			}
			return err
		}
		_, err = admin.Merge(ctx, &kvpb.MergeRequest{Key: splitKey(rng)})
		switch {
		case status.Code(err) == codes.Unimplemented:
			r.mu.Lock()
			r.noMerge = true
			r.mu.Unlock()
		case err == nil:
			r.mu.Lock()
			r.ranges--
			r.mu.Unlock()
		}
		return err
	})
	return s, "splits and merges every ~300ms", nil
}

// memberFault finishes a membership change: the node added by inject
// stays, and a random older node is removed and stopped, so the cluster
// keeps its size while its members change.
type memberFault struct{ added *node }

func (f memberFault) heal(r *run) error {
	var old []*node
	for _, nd := range r.c.nodes(false) {
		if f.added == nil || nd.id != f.added.id {
			old = append(old, nd)
		}
	}
	if f.added == nil || len(old) == 0 {
		return nil
	}
	// Removing a leader makes the range elect a new one, the harder case:
	// the schedule does that two times in three.
	victim := old[r.rng.IntN(len(old))]
	if r.rng.IntN(3) > 0 {
		if l := randomLeader(r, r.rng); f.added.id != l.id {
			victim = l
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Removing a leader's replica can end ambiguous (the leader steps down
	// as it applies its own removal); RemoveNode is idempotent, so the
	// nemesis does what the client's documentation says and retries.
	// It is asked of the other nodes, as an operator would after losing
	// the node: the victim, once out of meta, may no longer know where
	// the others are.
	var eps []string
	for _, nd := range old {
		if nd.id != victim.id {
			eps = append(eps, nd.grpcAddr)
		}
	}
	eps = append(eps, f.added.grpcAddr)
	cl, err := client.Dial(ctx, eps, &client.Options{RequestTimeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("dialling the nodes but n%d: %w", victim.id, err)
	}
	defer cl.Close()
	for attempt := 1; ; attempt++ {
		err := cl.RemoveNode(ctx, victim.id, true)
		if err == nil {
			break
		}
		if !errors.Is(err, client.ErrAmbiguous) && !errors.Is(err, client.ErrUnavailable) || ctx.Err() != nil {
			return fmt.Errorf("removing node %d (attempt %d): %w", victim.id, attempt, err)
		}
		r.logf("  removing n%d, attempt %d: %v; retrying", victim.id, attempt, err)
		pause(ctx, 200*time.Millisecond)
	}
	victim.mu.Lock()
	victim.removed = true
	victim.mu.Unlock()
	r.c.version.Add(1)
	victim.kill()
	r.logf("  removed n%d", victim.id)
	return nil
}

// changeMembership adds a fresh node as a voter of every range.
func changeMembership(r *run, rng *rand.Rand) (fault, string, error) {
	r.c.mu.Lock()
	id := r.c.next
	r.c.next++
	r.c.mu.Unlock()
	seed := r.c.nodes(false)[0]
	nd := r.c.newNode(id)
	if err := r.c.start(id, "--join", seed.grpcAddr); err != nil {
		return memberFault{}, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := r.admin().AddNode(ctx, &kvpb.NodeDescriptor{Address: nd.grpcAddr}); err != nil {
		return memberFault{}, "", fmt.Errorf("adding node %d: %w", id, err)
	}
	// The range list is the answering node's copy of meta: it can trail
	// splits and merges (the automatic merger's too, once the workloads'
	// ranges have been small and cold for --merge-delay). So a range gone
	// by the time its change is asked for was merged away and is passed
	// over, and the list is read again until every range in it holds the
	// new node (or was changed here: the list can trail that too).
	// A change refused because the range changed meanwhile (placement or a
	// split raced it) or whose outcome is unknown is asked again from a
	// fresh list, until the minute is up.
	done := map[uint64]bool{} // changed here, or merged away
	added := 0
	var lastErr error
	for {
		if lastErr != nil {
			pause(ctx, 200*time.Millisecond)
		}
		rs, err := r.admin().RangeList(ctx)
		if err != nil {
			if lastErr != nil {
				err = fmt.Errorf("%w (after %v)", err, lastErr)
			}
			return memberFault{added: nd}, "", fmt.Errorf("listing ranges: %w", err)
		}
		var pending []uint64
		for _, rg := range rs {
			if rid := rg.Descriptor.GetRangeId(); !done[rid] && !holds(rg.Descriptor, id) {
				pending = append(pending, rg.Descriptor.GetRangeId())
			}
		}
		if len(pending) == 0 {
			break
		}
		for _, rid := range pending {
			if _, err := r.admin().ChangeReplicas(ctx, rid, &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: id}); err != nil {
				if gone, lerr := rangeGone(ctx, r, rid); lerr == nil && gone {
					done[rid] = true
					continue
				}
				if ctx.Err() != nil {
					return memberFault{added: nd}, "", fmt.Errorf("adding node %d to range %d: %w", id, rid, err)
				}
				lastErr = fmt.Errorf("adding node %d to range %d: %w", id, rid, err)
				continue
			}
			done[rid] = true
			added++
		}
	}
	return memberFault{added: nd}, fmt.Sprintf("added n%d as a voter of %d ranges", id, added), nil
}

// holds says whether d has a replica on node id.
func holds(d *kvpb.RangeDescriptor, id uint64) bool {
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == id {
			return true
		}
	}
	return false
}

// rangeGone says whether range rid is no longer in the range list (merged
// away), waiting for the list to catch up with the merge for a few
// seconds: a range that is still listed then is not gone.
func rangeGone(ctx context.Context, r *run, rid uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		rs, err := r.admin().RangeList(ctx)
		if err == nil {
			found := false
			for _, rg := range rs {
				if rg.Descriptor.GetRangeId() == rid {
					found = true
				}
			}
			if !found {
				return true, nil
			}
		}
		if ctx.Err() != nil {
			return false, err
		}
		pause(ctx, 200*time.Millisecond)
	}
}

// multiFault heals several faults.
type multiFault []fault

func (m multiFault) heal(r *run) error {
	var errs []error
	for i := len(m) - 1; i >= 0; i-- {
		errs = append(errs, m[i].heal(r))
	}
	return errors.Join(errs...)
}

// injectCombined runs two different nemeses at once, drawn from those that
// leave the cluster's size alone.
func injectCombined(r *run, rng *rand.Rand) (fault, string, error) {
	var pool []*nemesis
	for _, n := range nemeses {
		if n.inject == nil || n.name == "membership" || n.name == "clock-skew" || n.nodeFlags != nil {
			// (A nemesis that needs its nodes started with flags of its
			// own is the nemesis of its whole run.)
			continue
		}
		if n.unavailable != nil && n.unavailable(r) != "" {
			continue
		}
		pool = append(pool, n)
	}
	rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	var faults multiFault
	var descs []string
	for _, n := range pool[:min(2, len(pool))] {
		f, d, err := n.inject(r, rng)
		if f != nil {
			faults = append(faults, f)
		}
		if err != nil {
			return faults, "", fmt.Errorf("%s: %w", n.name, err)
		}
		descs = append(descs, n.name+": "+d)
	}
	return faults, strings.Join(descs, " + "), nil
}
