package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"testing/synctest"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
)

// The client workload: operations on a small set of keys, each run as a
// series of attempts. An attempt is ONE blocking call into one node's
// Store on its own goroutine (Propose, or ReadBarrier and a read through
// rangesm.Reader, as the node's request path does); the goroutine only
// reports the outcome, and the simulator decides, on its own goroutine,
// whether and where to retry. So no two client goroutines ever touch a
// Store at once in an order the Go scheduler picks. A write carries a client ID and
// request sequence, so that a retry after an ambiguous attempt is applied
// at most once (the dedup the node relies on).

type opKind int

const (
	opGet opKind = iota
	opPut
	opCAS
	opDeleteRange
)

func (k opKind) String() string {
	return [...]string{"get", "put", "cas", "delete-range"}[k]
}

// op is one client operation.
type op struct {
	id    int
	kind  opKind
	key   string // get, put, cas; the start of a delete-range
	end   string // delete-range's end (exclusive)
	value string // put and cas: the value written
	// cas: expected value, or expectAbsent.
	expect       string
	expectAbsent bool
	final        bool // a final read of the quiet phase

	call      time.Time
	ctx       context.Context
	cancel    context.CancelFunc
	deadline  time.Time
	attempts  int
	ambiguous bool   // an attempt may have applied
	hint      uint64 // node to try next (a NotLeaderError's leader)
	stuck     bool   // waiting for a paused node
	inflight  chan attemptResult
	done      bool
	// outcome, once done
	ok      bool
	unknown bool
	ret     time.Time
	found   bool   // get: key found; cas: key found before
	got     string // get: the value; cas: the value before
	swapped bool
}

type attemptResult struct {
	node    uint64
	err     error
	res     command.Result
	found   bool
	value   []byte
	skipped string // the attempt was not made, and why
}

type workload struct {
	s       *Sim
	keys    []string
	ops     []*op
	pending []*op // not done, in ID order
	nextID  int

	adminBusy   bool
	adminDone   chan error
	adminWhat   string
	adminCancel context.CancelFunc
}

const (
	numKeys       = 8
	maxConcurrent = 10
	opTimeout     = time.Second
	maxAttempts   = 12
)

func newWorkload(s *Sim) *workload {
	w := &workload{s: s}
	for i := 0; i < numKeys; i++ {
		w.keys = append(w.keys, fmt.Sprintf("k%d", i))
	}
	return w
}

// waiting counts the pending operations that do not wait for a paused
// node (those are clients stuck on it; others keep coming).
func (w *workload) waiting() int {
	n := 0
	for _, o := range w.pending {
		if !o.stuck {
			n++
		}
	}
	return n
}

// start schedules the first client operation; each one arriving
// schedules the next, until the faulty phase ends.
func (w *workload) start() {
	w.scheduleArrival()
	w.scheduleAdmin()
	w.s.startFaults()
}

func (w *workload) scheduleArrival() {
	s := w.s
	gap := time.Duration(s.rng.Int64N(int64(8 * time.Millisecond)))
	if s.rng.IntN(64) == 0 {
		// A lull of 3 to 20 ticks: long enough for ranges to go to rest
		// (raft/quiesce.go) while faults go on, so that waking them, and
		// electing leaders for resting ranges, is tested too.
		gap = 3*tickInterval + time.Duration(s.rng.Int64N(int64(17*tickInterval)))
	}
	at := s.clock.Now().Add(gap)
	if !at.Before(s.end) {
		return
	}
	s.schedule(at, "", func() {
		if w.waiting() < maxConcurrent {
			w.begin(w.randomOp())
		}
		w.scheduleArrival()
	})
}

func (w *workload) randomOp() *op {
	s := w.s
	o := &op{kind: opKind(s.rng.IntN(10))}
	switch {
	case o.kind < 4:
		o.kind = opGet
	case o.kind < 7:
		o.kind = opPut
	case o.kind < 9:
		o.kind = opCAS
	default:
		o.kind = opDeleteRange
	}
	i := s.rng.IntN(numKeys)
	o.key = w.keys[i]
	switch o.kind {
	case opDeleteRange:
		j := i + 1 + s.rng.IntN(2)
		if j >= numKeys {
			o.end = "l" // past every key
		} else {
			o.end = w.keys[j]
		}
	case opCAS:
		if s.rng.IntN(4) == 0 {
			o.expectAbsent = true
		} else {
			// The value some earlier write of the key wrote, most often
			// the latest one a read saw.
			o.expect = w.recentValue(o.key)
		}
	}
	return o
}

// recentValue picks a value that was written to key (or "none").
func (w *workload) recentValue(key string) string {
	for i := len(w.ops) - 1; i >= 0 && i >= len(w.ops)-40; i-- {
		o := w.ops[i]
		if o.key == key && (o.kind == opPut || o.kind == opCAS) && w.s.rng.IntN(3) > 0 {
			return o.value
		}
	}
	return "none"
}

// begin starts op o.
func (w *workload) begin(o *op) {
	s := w.s
	w.nextID++
	o.id = w.nextID
	if o.kind == opPut || o.kind == opCAS {
		o.value = fmt.Sprintf("v%d", o.id)
	}
	o.call = s.clock.Now()
	o.deadline = o.call.Add(opTimeout)
	if o.final {
		o.deadline = o.call.Add(8 * time.Second)
	}
	o.ctx, o.cancel = context.WithCancel(context.Background())
	w.ops = append(w.ops, o)
	w.pending = append(w.pending, o)
	s.tracef("op %d begin %s %s %s %s", o.id, o.kind, o.key, o.end, o.value)
	s.schedule(o.deadline, s.whatf("op %d deadline", o.id), func() {
		if !o.done {
			o.cancel()
		}
	})
	w.attempt(o)
}

// finalReads reads every key once the cluster has settled: with the
// history's acknowledged writes, they show whether any was lost.
func (w *workload) finalReads() {
	for _, k := range w.keys {
		w.begin(&op{kind: opGet, key: k, final: true})
	}
}

func (w *workload) idle() bool { return len(w.pending) == 0 && !w.adminBusy }

func (w *workload) cancelAll() {
	for _, o := range w.pending {
		o.cancel()
	}
	if w.adminBusy {
		w.adminCancel()
	}
}

// pickNode chooses the node for o's next attempt: the leader a previous
// attempt was pointed to, else any running node.
func (w *workload) pickNode(o *op) *node {
	s := w.s
	if nd := s.node(o.hint); nd != nil && nd.up && s.rng.IntN(5) > 0 {
		return nd
	}
	var up []*node
	for _, nd := range s.nodes {
		if nd.up {
			up = append(up, nd)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[s.rng.IntN(len(up))]
}

// attempt starts o's next attempt on a goroutine and lets it run until it
// blocks (in the Store) or finishes.
func (w *workload) attempt(o *op) {
	nd := w.pickNode(o)
	o.attempts++
	ch := make(chan attemptResult, 1)
	o.inflight = ch
	if nd == nil {
		ch <- attemptResult{skipped: "no node up"}
		return
	}
	if s := w.s; s.paused(nd) {
		if s.rng.IntN(3) > 0 {
			// The client gives up connecting and tries elsewhere; the
			// request was never sent.
			s.schedule(s.clock.Now().Add(time.Duration(5+s.rng.IntN(25))*time.Millisecond), "", func() {
				ch <- attemptResult{node: nd.id, skipped: "node not responding"}
			})
			return
		}
		// The request waits for the paused process.
		o.stuck = true
		s.schedule(s.afterPause(nd), s.whatf("op %d attempt after pause", o.id), func() {
			o.stuck = false
			w.attemptOn(o, nd, ch)
		})
		return
	}
	w.attemptOn(o, nd, ch)
}

func (w *workload) attemptOn(o *op, nd *node, ch chan attemptResult) {
	if !nd.up {
		ch <- attemptResult{node: nd.id, skipped: "node down"}
		return
	}
	st, db := nd.store, nd.db
	id := nd.id
	go func() {
		r := runAttempt(o, st, db)
		r.node = id
		ch <- r
	}()
	// Alone until it blocks: several attempts may start in one step.
	synctest.Wait()
}

// runAttempt makes one attempt of o on a node (its own goroutine).
func runAttempt(o *op, st *raft.Store, db *storage.DB) attemptResult {
	ctx := o.ctx
	key := []byte(o.key)
	r, err := st.ReplicaForKey(key)
	if err != nil {
		return attemptResult{err: err}
	}
	if o.kind == opGet {
		desc := r.Descriptor()
		if !keys.ContainsUserKey(desc, key) {
			return attemptResult{skipped: "key moved"}
		}
		if _, err := r.ReadBarrier(ctx); err != nil {
			return attemptResult{err: err}
		}
		if r.Frozen() {
			return attemptResult{err: r.FrozenError()}
		}
		// After the barrier, the replica's frontier covers every write
		// that applied before the read began.
		ts := r.StateMachine().(*rangesm.Range).MVCCState().Frontier
		kv, found, err := rangesm.NewReader(db).Get(key, ts)
		if err != nil {
			return attemptResult{err: err}
		}
		if !found {
			return attemptResult{}
		}
		return attemptResult{found: true, value: kv.Value}
	}
	cmd := &command.Command{Header: command.Header{ClientID: uint64(1000 + o.id), RequestSeq: 1}}
	switch o.kind {
	case opPut:
		cmd.Kind = command.KindPut
		cmd.Mutations = []command.Mutation{{Kind: command.KindPut, Key: key, Value: []byte(o.value)}}
	case opCAS:
		cmd.Kind = command.KindCAS
		cmd.CAS = command.CAS{Key: key, ExpectAbsent: o.expectAbsent, Expected: []byte(o.expect), NewValue: []byte(o.value)}
	case opDeleteRange:
		desc := r.Descriptor()
		if end := desc.GetEndKey(); len(end) > 0 && bytes.Compare([]byte(o.end), end) > 0 {
			return attemptResult{skipped: "delete-range spans ranges"}
		}
		cmd.Kind = command.KindDeleteRange
		cmd.Mutations = []command.Mutation{{Kind: command.KindDeleteRange, Key: key, Value: []byte(o.end)}}
	}
	res, _, err := st.Propose(ctx, r.RangeID(), cmd)
	return attemptResult{res: res, err: err}
}

// collect handles the attempts that finished, in op order; it reports
// whether any did.
func (w *workload) collect() bool {
	any := w.collectAdmin()
	for _, o := range append([]*op(nil), w.pending...) {
		select {
		case r := <-o.inflight:
			any = true
			w.handle(o, r)
		default:
		}
	}
	return any
}

func (w *workload) handle(o *op, r attemptResult) {
	s := w.s
	o.inflight = nil
	if r.skipped == "" && r.err == nil && r.res.Err() == nil {
		o.ok, o.ret = true, s.clock.Now()
		switch o.kind {
		case opGet:
			o.found, o.got = r.found, string(r.value)
		case opCAS:
			o.swapped, o.found, o.got = r.res.Succeeded, r.res.Found, string(r.res.Value)
		}
		s.tracef("op %d n%d ok found=%v got=%s swapped=%v", o.id, r.node, o.found, o.got, o.swapped)
		w.finish(o)
		return
	}
	why := r.skipped
	if r.err != nil {
		why = r.err.Error()
		if errors.Is(r.err, raft.ErrAmbiguous) {
			o.ambiguous = true
		}
		var nle *raft.NotLeaderError
		if errors.As(r.err, &nle) {
			o.hint = nle.LeaderNodeID
		}
	} else if r.res.Err() != nil {
		why = r.res.Err().Error()
	}
	s.tracef("op %d n%d attempt %d failed: %s", o.id, r.node, o.attempts, why)
	if o.ctx.Err() != nil || o.attempts >= maxAttempts && !o.final {
		o.unknown = o.ambiguous && o.kind != opGet
		o.ret = s.clock.Now()
		w.finish(o)
		return
	}
	backoff := time.Duration(1+s.rng.IntN(10)) * time.Millisecond
	s.schedule(s.clock.Now().Add(backoff), "", func() {
		if !o.done && o.ctx.Err() == nil {
			w.attempt(o)
		} else if !o.done {
			o.unknown = o.ambiguous && o.kind != opGet
			o.ret = s.clock.Now()
			w.finish(o)
		}
	})
}

func (w *workload) finish(o *op) {
	s := w.s
	o.done = true
	o.cancel()
	for i, p := range w.pending {
		if p == o {
			w.pending = append(w.pending[:i], w.pending[i+1:]...)
			break
		}
	}
	switch {
	case o.ok:
		s.res.OpsOK++
	case o.unknown:
		s.res.OpsUnknown++
		s.tracef("op %d outcome unknown", o.id)
	default:
		s.res.OpsFailed++
		s.tracef("op %d failed", o.id)
	}
}
