package node

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/rangesm"
)

// Closing timestamps for reads (docs/versions.md, "The frontier rule").
//
// A read at a timestamp above its range's frontier F cannot be served yet:
// a write could still apply at or below it. The range's leader proposes a
// Close(ts) command, which raises F to ts on every replica, and the read
// is served once it has applied. Closes are coalesced per range: while one
// is in flight, reads it covers wait for it, and a read above it waits for
// it to finish and then starts the next, so a range has one close in
// flight however many reads wait.

// Keeping frontiers fresh for follower reads: a leader that serves a
// BOUNDED_STALE read whose bound its frontier is close to missing (older
// than half the bound: a follower's was too stale and the client came to
// the leader, or the leader's own is getting old) notes that its range
// wants a fresh frontier, with the smallest bound asked. For freshWindow
// after the last such read, every freshInterval, it closes the current
// time if the frontier is older than half that bound: so followers can
// serve the next reads, and a range read with a bound of 10 s is closed
// about every 5 s, not every freshInterval. A range that gets no such
// reads is never closed this way (an idle range stays idle), unless it
// has watchers (watch_feed.go), whose progress notices come from its
// frontier: those are closed every freshInterval. While no range wants a
// fresh frontier and none has watchers, the loop sleeps until one does
// (closer.notify) rather than look every freshInterval.
const (
	freshInterval = 200 * time.Millisecond
	freshWindow   = 5 * time.Second
)

// closer holds the close in flight of each range, and the ranges that
// want a fresh frontier.
type closer struct {
	mu       sync.Mutex
	inflight map[uint64]*closeCall
	// fresh is, per range, the demand for a fresh frontier this node (as
	// its leader) last noted.
	fresh map[uint64]freshWant
	// kick wakes the freshness loop when demand appears (notify).
	kick chan struct{}
	// passes counts the freshness loop's passes (tests).
	passes atomic.Uint64
}

// kickLocked returns the channel that wakes the freshness loop.
// REQUIRES: c.mu.
func (c *closer) kickLocked() chan struct{} {
	if c.kick == nil {
		c.kick = make(chan struct{}, 1)
	}
	return c.kick
}

// notify wakes the freshness loop if it sleeps for want of demand: a
// range was just noted wanting a fresh frontier, or got a watcher.
func (c *closer) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notifyLocked()
}

// REQUIRES: c.mu.
func (c *closer) notifyLocked() {
	select {
	case c.kickLocked() <- struct{}{}:
	default:
	}
}

// freshWant is a range's demand for a fresh frontier: when it was last
// noted, and the smallest staleness bound asked since it began.
type freshWant struct {
	last  time.Time
	bound time.Duration
}

// wanted notes that rangeID served, at now, a bounded-staleness read
// with bound whose frontier was older than half of it.
func (c *closer) wanted(rangeID uint64, now time.Time, bound time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fresh == nil {
		c.fresh = make(map[uint64]freshWant)
	}
	if w, ok := c.fresh[rangeID]; ok && now.Sub(w.last) <= freshWindow {
		bound = min(bound, w.bound)
	}
	c.fresh[rangeID] = freshWant{last: now, bound: bound}
	c.notifyLocked()
}

// freshnessLoop closes the current time on the ranges that want a fresh
// frontier, whose leader this node is and whose frontier is older than
// half their bound, every freshInterval, until the node stops. With no
// such range and no watched one it stops its ticker and waits for
// closer.notify: an idle node has no timer here.
func (n *Node) freshnessLoop() {
	defer n.bgWG.Done()
	t := time.NewTicker(freshInterval)
	defer t.Stop()
	n.closes.mu.Lock()
	kick := n.closes.kickLocked()
	n.closes.mu.Unlock()
	var sleeping <-chan struct{} // kick while the ticker is stopped
	// keep is, per range, how old its frontier may get before a close.
	keep := map[uint64]time.Duration{}
	for {
		select {
		case <-n.bgCtx.Done():
			return
		case <-t.C:
		case <-sleeping:
			t.Reset(freshInterval)
			sleeping = nil
		}
		n.closes.passes.Add(1)
		now := time.Now()
		clear(keep)
		n.closes.mu.Lock()
		for id, w := range n.closes.fresh {
			if now.Sub(w.last) > freshWindow {
				delete(n.closes.fresh, id)
				continue
			}
			keep[id] = w.bound / 2
		}
		n.closes.mu.Unlock()
		// Ranges with watchers are kept fresh too, so that their progress
		// notices advance while no write comes (docs/watch.md).
		for _, id := range n.watches.watchedRanges() {
			keep[id] = 0
		}
		if len(keep) == 0 {
			t.Stop()
			sleeping = kick
			continue
		}
		for id, age := range keep {
			r, err := n.store.Replica(id)
			if err != nil || !r.IsLeader() || r.Frozen() {
				continue
			}
			if f := mvccState(r).Frontier; age > 0 && !f.IsZero() && f.WallTime >= n.clock.PhysicalNow()-int64(age) {
				continue // fresh enough for every bound asked
			}
			ts := n.clock.Now()
			go func() {
				ctx, cancel := context.WithTimeout(n.bgCtx, freshInterval*5)
				defer cancel()
				_ = n.closeAt(ctx, "close", r, ts) // the next tick tries again
			}()
		}
	}
}

type closeCall struct {
	ts   hlc.Timestamp
	done chan struct{}
	err  error
}

// mvccState returns the MVCC state r's replica has written (its frontier
// and GC threshold).
func mvccState(r *raft.Replica) rangesm.MVCCState {
	if rg, ok := r.StateMachine().(*rangesm.Range); ok {
		return rg.MVCCState()
	}
	return rangesm.MVCCState{}
}

// closeAt makes r's frontier at least ts, proposing a Close if it is not:
// when it returns nil, r's replica has applied a frontier >= ts. Only the
// leader proposes; elsewhere the proposal fails with NotLeader. The
// returned error is a status for the client.
func (n *Node) closeAt(ctx context.Context, op string, r *raft.Replica, ts hlc.Timestamp) error {
	c := &n.closes
	for {
		if ts.LessEq(mvccState(r).Frontier) {
			return nil
		}
		c.mu.Lock()
		if c.inflight == nil {
			c.inflight = make(map[uint64]*closeCall)
		}
		call := c.inflight[r.RangeID()]
		if call == nil {
			// Close at the clock's reading if that is higher: one close
			// then covers every read up to now.
			call = &closeCall{ts: ts.Forward(n.clock.Now()), done: make(chan struct{})}
			c.inflight[r.RangeID()] = call
			go n.proposeClose(r, call)
		}
		c.mu.Unlock()
		select {
		case <-call.done:
		case <-ctx.Done():
			return readError(op, ctx.Err())
		}
		if call.err != nil {
			switch {
			case command.RejectionCode(call.err) == command.CodeRangeFrozen:
				// Frozen for a merge: nothing closes until the merge
				// commits (then the left-hand range serves the keys) or
				// is aborted.
				return unavailable(50*time.Millisecond, "%s: not served: %v", op, call.err)
			case errors.Is(call.err, raft.ErrAmbiguous):
				// The close's outcome is unknown (the range merged, the
				// leader stepped down): the read was not served, and
				// changes nothing either way.
				return unavailable(50*time.Millisecond, "%s: not served: closing the range's timestamp: %v", op, call.err)
			}
			return n.raftError(op, call.err)
		}
	}
}

// proposeClose proposes call's Close and reports its outcome to every
// read waiting on it. It runs on its own so that a read's cancellation
// does not cancel a close other reads wait for.
func (n *Node) proposeClose(r *raft.Replica, call *closeCall) {
	ctx, cancel := context.WithTimeout(n.bgCtx, closeTimeout)
	defer cancel()
	n.metrics.closes.Inc()
	res, _, err := n.store.Propose(ctx, r.RangeID(), &command.Command{Kind: command.KindClose, Close: call.ts})
	if err == nil {
		err = res.Err()
	}
	call.err = err
	n.closes.mu.Lock()
	if n.closes.inflight[r.RangeID()] == call {
		delete(n.closes.inflight, r.RangeID())
	}
	n.closes.mu.Unlock()
	close(call.done)
}
