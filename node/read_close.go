package node

import (
	"context"
	"errors"
	"slices"
	"sync"
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
// BOUNDED_STALE read (a follower's was too stale, or the client came to
// the leader) notes that its range wants a fresh frontier, and for
// freshWindow after the last such read it closes the current time every
// freshInterval, so that followers can serve the next ones at most about
// that much behind. A range that gets no such reads is never closed this
// way (an idle range stays idle), unless it has watchers (watch_feed.go),
// whose progress notices come from its frontier.
const (
	freshInterval = 200 * time.Millisecond
	freshWindow   = 5 * time.Second
)

// closer holds the close in flight of each range, and the ranges that
// want a fresh frontier.
type closer struct {
	mu       sync.Mutex
	inflight map[uint64]*closeCall
	// fresh is, per range, when this node (as its leader) last served a
	// bounded-staleness read.
	fresh map[uint64]time.Time
}

// wanted notes that rangeID served a bounded-staleness read at now.
func (c *closer) wanted(rangeID uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fresh == nil {
		c.fresh = make(map[uint64]time.Time)
	}
	c.fresh[rangeID] = now
}

// freshnessLoop closes the current time on the ranges that want a fresh
// frontier and whose leader this node is, every freshInterval, until the
// node stops.
func (n *Node) freshnessLoop() {
	defer n.bgWG.Done()
	t := time.NewTicker(freshInterval)
	defer t.Stop()
	for {
		select {
		case <-n.bgCtx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var ids []uint64
		n.closes.mu.Lock()
		for id, last := range n.closes.fresh {
			if now.Sub(last) > freshWindow {
				delete(n.closes.fresh, id)
				continue
			}
			ids = append(ids, id)
		}
		n.closes.mu.Unlock()
		// Ranges with watchers are kept fresh too, so that their progress
		// notices advance while no write comes (docs/watch.md).
		for _, id := range n.watches.watchedRanges() {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		for _, id := range ids {
			r, err := n.store.Replica(id)
			if err != nil || !r.IsLeader() || r.Frozen() {
				continue
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
