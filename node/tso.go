package node

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/tso"
)

// The timestamp oracle on this node (package tso): the Oracle, which
// serves while this node holds the meta range's lease; its node-to-node
// service (raftrpcpb.TimestampOracle, node certificates only); and the
// node's batching client, which finds the oracle wherever meta's lease is.

// oracleMeta is the oracle's view of this node's meta replica (tso.Meta).
type oracleMeta struct{ n *Node }

func (m oracleMeta) replica() (*raft.Replica, error) {
	r, err := m.n.store.Replica(keys.MetaRangeID)
	if err != nil {
		// No replica of meta here: not the oracle, and no hint.
		return nil, &raft.NotLeaderError{RangeID: keys.MetaRangeID}
	}
	return r, nil
}

// Lease implements tso.Meta.
func (m oracleMeta) Lease(ctx context.Context) (uint64, error) {
	r, err := m.replica()
	if err != nil {
		return 0, err
	}
	st := r.Status()
	if st.State != "leader" {
		return 0, r.NotLeaderError()
	}
	if !st.LeaseValid {
		// A quorum round renews the lease of a leader that still leads.
		start := time.Now()
		_, err := r.ReadBarrier(ctx)
		if d := time.Since(start); err != nil || d > 100*time.Millisecond {
			m.n.log.Debug("oracle: renewing meta's lease", "took", d.String(), "err", err)
		}
		if err != nil {
			return 0, err
		}
		if st = r.Status(); st.State != "leader" || !st.LeaseValid {
			return 0, r.NotLeaderError()
		}
	}
	return st.Term, nil
}

// Check implements tso.Meta.
func (m oracleMeta) Check(term uint64) error {
	r, err := m.replica()
	if err != nil {
		return err
	}
	if st := r.Status(); st.State != "leader" || !st.LeaseValid || st.Term != term {
		return r.NotLeaderError()
	}
	return nil
}

// RaiseWindow implements tso.Meta.
func (m oracleMeta) RaiseWindow(ctx context.Context, w int64) (int64, error) {
	res, _, err := m.n.store.Propose(ctx, keys.MetaRangeID, &command.Command{Kind: command.KindTSOWindow, TSOWindow: w})
	if err != nil {
		return 0, err
	}
	if err := res.Err(); err != nil {
		return 0, err
	}
	return int64(res.NodeID), nil
}

// oracleError maps a failure of the oracle on this node to the statuses
// of the TimestampOracle service.
func (n *Node) oracleError(op string, err error) error {
	var nle *raft.NotLeaderError
	switch {
	case errors.Is(err, hlc.ErrClockOffset):
		return n.clockOffsetStatus(op, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.As(err, &nle), errors.Is(err, raft.ErrNotLeader):
		return n.raftError(op, err)
	}
	return unavailable(50*time.Millisecond, "%s: %v", op, err)
}

// tsoServer serves raftrpcpb.TimestampOracle.
type tsoServer struct {
	raftrpcpb.UnimplementedTimestampOracleServer
	n *Node
}

func (s *tsoServer) Timestamps(ctx context.Context, req *raftrpcpb.TimestampsRequest) (*raftrpcpb.TimestampsResponse, error) {
	c := req.GetCount()
	if c < 1 || c > tso.MaxCount {
		return nil, invalidArgument("count", "%d timestamps asked for; 1 to %d allowed", c, tso.MaxCount)
	}
	first, last, err := s.n.oracle.Timestamps(ctx, int(c))
	if err != nil {
		return nil, s.n.oracleError("Timestamps", err)
	}
	return &raftrpcpb.TimestampsResponse{First: tsToProto(first), Last: tsToProto(last), Count: c}, nil
}

func (s *tsoServer) Observe(ctx context.Context, req *raftrpcpb.ObserveRequest) (*raftrpcpb.ObserveResponse, error) {
	ts, err := tsFromProto(req.GetTimestamp())
	if err != nil {
		return nil, invalidArgument("timestamp", "%v", err)
	}
	if err := s.n.oracle.Observe(ctx, ts); err != nil {
		return nil, s.n.oracleError("Observe", err)
	}
	return &raftrpcpb.ObserveResponse{}, nil
}

func tsToProto(t hlc.Timestamp) *kvpb.Timestamp {
	return &kvpb.Timestamp{WallNanos: t.WallTime, Logical: uint32(t.Logical)}
}

func tsFromProto(p *kvpb.Timestamp) (hlc.Timestamp, error) {
	t := hlc.Timestamp{WallTime: p.GetWallNanos(), Logical: int32(p.GetLogical())}
	if !t.Valid() || p.GetLogical() > 1<<31-1 {
		return hlc.Timestamp{}, fmt.Errorf("malformed timestamp %d,%d", p.GetWallNanos(), p.GetLogical())
	}
	return t, nil
}

// oracleTransport is the node's tso.Transport: it calls the oracle on
// this node directly when this node holds meta's lease, and otherwise the
// node it believes holds it, following NotLeader hints.
type oracleTransport struct {
	n *Node
	// hint is the node that last answered as the oracle, or that a
	// NotLeader answer named (nil: none), with what this node's replica
	// of meta knew then (oracleHint).
	hint atomic.Pointer[oracleHint]
	// conn is the client of the node last called as the oracle: finding
	// a node's connection reads meta's node records from the engine, and
	// one client's put makes one oracle call. Dropped whenever a call
	// fails, so that a node at a new address is looked up again.
	conn atomic.Pointer[oracleConn]
}

// oracleHint is a node believed to hold the oracle, and the leader-watch
// context (raft.Replica.LeaderWatch) of this node's replica of meta when
// that belief was formed (nil: no replica of meta here). Once the context
// is done, the replica has learned of a leader since, which is newer news
// than the hint: target asks that leader instead. Without it, the first
// call after meta's leader was cut off (partitioned, paused) went to the
// remembered old oracle, on the hint of the last call that succeeded
// there, and waited out a whole attempt timeout: the call began after
// the replica had learned of the new leader, so no change came during
// it to abandon it on, and every write of the node waited for that call
// (docs/unavailability.md).
type oracleHint struct {
	node  uint64
	watch context.Context
}

type oracleConn struct {
	node uint64
	c    raftrpcpb.TimestampOracleClient
}

// client returns the oracle service of node target.
func (t *oracleTransport) client(target uint64) (raftrpcpb.TimestampOracleClient, error) {
	if c := t.conn.Load(); c != nil && c.node == target {
		return c.c, nil
	}
	cc, err := t.n.peers.conn(target)
	if err != nil {
		return nil, unavailable(100*time.Millisecond, "%v", err)
	}
	c := &oracleConn{node: target, c: raftrpcpb.NewTimestampOracleClient(cc)}
	t.conn.Store(c)
	return c.c, nil
}

// Timestamps implements tso.Transport.
func (t *oracleTransport) Timestamps(ctx context.Context, count int) (first, last hlc.Timestamp, err error) {
	err = t.retry(ctx, func(ctx context.Context, target uint64) error {
		if target == t.n.ident.NodeID {
			f, l, err := t.n.oracle.Timestamps(ctx, count)
			if err != nil {
				return t.n.oracleError("Timestamps", err)
			}
			first, last = f, l
			return nil
		}
		c, err := t.client(target)
		if err != nil {
			return err
		}
		resp, err := c.Timestamps(ctx, &raftrpcpb.TimestampsRequest{Count: uint32(count)})
		if err != nil {
			return err
		}
		if first, err = tsFromProto(resp.GetFirst()); err != nil {
			return err
		}
		last, err = tsFromProto(resp.GetLast())
		return err
	})
	return first, last, err
}

// Observe implements tso.Transport.
func (t *oracleTransport) Observe(ctx context.Context, ts hlc.Timestamp) error {
	return t.retry(ctx, func(ctx context.Context, target uint64) error {
		if target == t.n.ident.NodeID {
			if err := t.n.oracle.Observe(ctx, ts); err != nil {
				return t.n.oracleError("Observe", err)
			}
			return nil
		}
		c, err := t.client(target)
		if err != nil {
			return err
		}
		_, err = c.Observe(ctx, &raftrpcpb.ObserveRequest{Timestamp: tsToProto(ts)})
		return err
	})
}

// oracleRetryCap caps the backoff between tries at the oracle. While meta
// elects a leader every write of the node waits on these tries, and the
// new leader is known within a round trip of its election: at 200 ms a
// try took up to 200 ms past it to notice (a killed oracle's window in
// docs/benchmarks.md, "Unavailability under leader faults"). 50 ms costs
// at most 20 calls a second from each node, during an election only.
const oracleRetryCap = 50 * time.Millisecond

// retry calls call on the node believed to be the oracle until it
// succeeds or ctx ends, following NotLeader hints; other failures (no
// leader yet, the oracle's clock refusing) back off first.
func (t *oracleTransport) retry(ctx context.Context, call func(context.Context, uint64) error) error {
	backoff := 10 * time.Millisecond
	var last error
	for attempt := 0; ; attempt++ {
		// What the replica of meta knows before the call: a success
		// makes target the hint only until the replica learns more.
		watch := t.metaWatch()
		target := t.target(attempt)
		var err error
		start := time.Now()
		if target == 0 {
			err = unavailable(100*time.Millisecond, "no node known to hold the meta range")
		} else {
			err = t.attempt(ctx, target, call)
		}
		if err != nil {
			// The oracle's part of a window (docs/unavailability.md): at
			// debug level, as etcd-io/raft's elections are.
			t.n.log.Debug("oracle call failed", "target", target, "took", time.Since(start).String(), "err", err)
		}
		if err == nil {
			if h := t.hint.Load(); h == nil || h.node != target || h.watch != watch {
				t.hint.Store(&oracleHint{node: target, watch: watch})
			}
			return nil
		}
		last = err
		t.hint.Store(nil)
		t.conn.Store(nil)
		if leader := notLeaderHint(err); leader != 0 && leader != target {
			t.hint.Store(&oracleHint{node: leader, watch: t.metaWatch()})
			continue
		}
		var moved *errOracleMoved
		if errors.As(err, &moved) {
			t.hint.Store(&oracleHint{node: moved.to, watch: t.metaWatch()})
			continue
		}
		select {
		case <-ctx.Done():
			return unavailable(100*time.Millisecond, "no timestamp from the oracle (meta's leaseholder): %v", last)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, oracleRetryCap)
	}
}

// attempt makes one call to target. A call to another node is bounded by
// an election timeout, as the client bounds its attempts: a frozen oracle
// (SIGSTOP, a stalled VM) must not hold every request of this node for
// the whole CallTimeout while meta elects a leader elsewhere. It ends
// sooner, with an errOracleMoved, once this node's replica of meta learns
// of a leader other than target: the answer could then only be NotLeader,
// and an old oracle that is frozen or cut off would not give even that
// before the attempt timeout, while every request of this node needing a
// timestamp waits for this one call (docs/benchmarks.md, "Unavailability
// under leader faults"). Watching costs the call no goroutine: the
// replica's leader-change context (raft.Replica.LeaderWatch) runs the
// check only when meta's leader changes.
func (t *oracleTransport) attempt(ctx context.Context, target uint64, call func(context.Context, uint64) error) error {
	if target == t.n.ident.NodeID {
		return call(ctx, target)
	}
	cfg := t.n.store.Config()
	actx, cancel := context.WithTimeout(ctx, time.Duration(cfg.ElectionTicks)*cfg.TickInterval)
	defer cancel()
	r, err := t.n.store.Replica(keys.MetaRangeID)
	if err != nil {
		return call(actx, target) // no replica of meta here: nothing to learn from
	}
	known, moved := r.LeaderWatch()
	var movedTo atomic.Uint64
	stop := context.AfterFunc(moved, func() { abandonOnMove(actx, cancel, r, target, known, &movedTo) })
	defer stop()
	err = call(actx, target)
	if l := movedTo.Load(); l != 0 && err != nil && ctx.Err() == nil {
		return &errOracleMoved{from: target, to: l, err: err}
	}
	return err
}

// abandonOnMove runs (on its own goroutine, from context.AfterFunc) when
// meta's leader as r knows it has changed during an attempt at target: it
// cancels the attempt once that leader is a node other than target and
// other than known, the leader r knew when the attempt began (which a
// NotLeader hint may have just superseded, so it is no reason), recording
// it in movedTo; a change to no leader or back to target waits for the
// next change, until actx ends.
func abandonOnMove(actx context.Context, cancel context.CancelFunc, r *raft.Replica, target, known uint64, movedTo *atomic.Uint64) {
	for {
		l, moved := r.LeaderWatch()
		if l != 0 && l != target && l != known {
			movedTo.Store(l)
			cancel()
			return
		}
		select {
		case <-actx.Done():
			return
		case <-moved.Done():
		}
	}
}

// errOracleMoved: an attempt at the oracle on node from was abandoned
// because this node's replica of meta learned that another node, to, leads
// meta now.
type errOracleMoved struct {
	from, to uint64
	err      error
}

func (e *errOracleMoved) Error() string {
	return fmt.Sprintf("abandoned the oracle call to node %d: meta's leader moved to node %d (%v)", e.from, e.to, e.err)
}

func (e *errOracleMoved) Unwrap() error { return e.err }

// metaWatch returns the leader-watch context of this node's replica of
// meta, nil if it has none.
func (t *oracleTransport) metaWatch() context.Context {
	r, err := t.n.store.Replica(keys.MetaRangeID)
	if err != nil {
		return nil
	}
	_, w := r.LeaderWatch()
	return w
}

// target is the node to ask on the given attempt: the hint, unless this
// node's replica of meta has learned of a leader since (oracleHint), else
// meta's leader as that replica knows it, else the members in turn.
func (t *oracleTransport) target(attempt int) uint64 {
	h := t.hint.Load()
	if h != nil && (h.watch == nil || h.watch.Err() == nil) {
		return h.node
	}
	if r, err := t.n.store.Replica(keys.MetaRangeID); err == nil {
		if l := r.LeaderNodeID(); l != 0 {
			return l
		}
	}
	if h != nil {
		return h.node // the replica knows no leader now: the hint may still hold
	}
	ms := t.n.members()
	if len(ms) == 0 {
		return 0
	}
	return ms[attempt%len(ms)].GetNodeId()
}

// oracleSource is the node's TimestampSource (timestamps.go): timestamps
// from the oracle, through the node's batching client. A node whose clock
// may not serve takes none.
type oracleSource struct{ n *Node }

// Now implements TimestampSource.
func (s oracleSource) Now(ctx context.Context) (hlc.Timestamp, error) {
	if err := s.n.clockGuard.checkCounted(); err != nil {
		return hlc.Timestamp{}, s.n.clockOffsetStatus("timestamp", err)
	}
	return s.n.tsoClient.Now(ctx)
}

// Observe implements TimestampSource.
func (s oracleSource) Observe(ctx context.Context, ts hlc.Timestamp) error {
	return s.n.tsoClient.Observe(ctx, ts)
}
