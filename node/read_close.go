package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/rangesm/command"
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

// closer holds the close in flight of each range.
type closer struct {
	mu       sync.Mutex
	inflight map[uint64]*closeCall
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
