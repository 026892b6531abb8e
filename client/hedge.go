package client

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
)

// Hedged reads (docs/sharding.md, "Client routing").
//
// A read changes nothing, so it may be sent to more than one node at
// once. An attempt of a read that has had no answer within
// Options.HedgeDelay is also sent to the next candidate, and so on every
// HedgeDelay until the attempt ends (at most maxHedges extra requests in
// flight at once; a node that answered may be asked again): for a
// linearizable read, the leader the client knows now if it is another
// node (a NotLeader answer to an earlier hedge may just have named it),
// else a voter not being asked, which may have become leader or will name
// the leader; for a stale read, any other replica. The first good answer
// wins and the other requests are cancelled. So a read held up by a
// stalled or paused node, or one that lost its leadership, costs about
// one HedgeDelay instead of the attempt timeout. When a linearizable read
// is answered by a node other than the one it was routed to, that node is
// the leader: the cache learns it.
//
// A read sent so may run its call more than once at the same time, so its
// call must share no mutable state between runs: routedRead gives each
// run its own request and keeps the first answer.

// maxHedges bounds the extra requests of one attempt in flight at once.
const maxHedges = 2

// hedgeMode says whether, and how, the attempts of a request are hedged.
type hedgeMode int

const (
	noHedge           hedgeMode = iota // writes, and reads whose call is not safe to run twice
	hedgeLinearizable                  // hedge to the known leader, then voters
	hedgeStale                         // hedge to any other replica
)

// routedRead is routed for a read, with hedging: call may run several
// times at once (it must build its own request each time) and returns its
// answer; the first good answer is returned.
func routedRead[T any](c *Client, ctx context.Context, op string, mode hedgeMode, rk routeKey,
	call func(context.Context, *endpoint, *kvpb.RangeDescriptor) (T, error)) (T, error) {
	var mu sync.Mutex
	var out T
	won := false
	err := c.route(ctx, op, false, mode, rk, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) error {
		v, err := call(ctx, e, d)
		if err == nil {
			mu.Lock()
			if !won {
				out, won = v, true
			}
			mu.Unlock()
		}
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// readHedge is the hedge mode of a read with options o at timestamp at:
// linearizable for a read of the latest state that is not stale; a stale
// read, or one at a timestamp, goes to any replica (and a node that
// answers it is not taken for the leader).
func readHedge(o readOptions, at Timestamp) hedgeMode {
	if !o.stale && at.IsZero() {
		return hedgeLinearizable
	}
	return hedgeStale
}

// hedgeDelay is Options.HedgeDelay; 0 when hedging is off.
func (c *Client) hedgeDelay() time.Duration {
	return max(c.opts.HedgeDelay, 0)
}

type hedgeResult struct {
	addr string
	err  error
}

// hedgedAttempt runs one attempt of a read at addr (endpoint e), hedged as
// the package comment says, within actx. It returns the address that
// answered (the winner's) and nil, or addr and its error (every request
// failed: addr's error, which the caller interprets), or addr and actx's
// error when the attempt timed out.
func (c *Client) hedgedAttempt(actx context.Context, mode hedgeMode, ent *rangeEntry, addr string, e *endpoint,
	call func(context.Context, *endpoint, *kvpb.RangeDescriptor) error) (string, error) {
	d := c.hedgeDelay()
	if mode == noHedge || d <= 0 {
		return addr, call(actx, e, ent.desc)
	}
	hctx, cancel := context.WithCancel(actx)
	defer cancel() // the losers
	results := make(chan hedgeResult, 1+maxHedges)
	// inFlight are the nodes asked and not answered yet: a node that
	// answered NotLeader may be asked again later (it may be elected).
	inFlight := map[string]bool{}
	launch := func(a string, ep *endpoint) {
		inFlight[a] = true
		go func() { results <- hedgeResult{a, call(hctx, ep, ent.desc)} }()
	}
	launch(addr, e)
	var primaryErr error
	hedge := func() {
		if len(inFlight) > maxHedges {
			return
		}
		a := c.hedgeTarget(ent, mode, inFlight)
		if a == "" {
			return
		}
		if ep, err := c.endpointFor(a); err == nil {
			launch(a, ep)
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case r := <-results:
			delete(inFlight, r.addr)
			if r.err == nil {
				if r.addr != addr {
					c.hedgeWon(ent, mode, r.addr)
				}
				return r.addr, nil
			}
			if r.addr == addr && primaryErr == nil {
				primaryErr = r.err
			}
			if mode == hedgeLinearizable && namesLeader(r.err) {
				// A follower that knows the leader: learn it, and ask
				// the leader at once if it is not being asked.
				c.learn(r.err, ent)
				hedge()
			}
			if len(inFlight) == 0 {
				if primaryErr == nil {
					primaryErr = r.err
				}
				return addr, primaryErr
			}
		case <-timer.C:
			hedge()
			timer.Reset(d)
		case <-actx.Done():
			return addr, actx.Err()
		}
	}
}

// hedgeTarget is the next candidate for a hedge of a read routed with
// ent, other than the nodes in flight: "" if none.
func (c *Client) hedgeTarget(ent *rangeEntry, mode hedgeMode, inFlight map[string]bool) string {
	usable := func(a string) bool {
		return a != "" && !inFlight[a] && !c.suspects.has(a)
	}
	cur := c.cache.entry(ent.desc.GetRangeId())
	if cur == nil {
		cur = ent
	}
	if mode == hedgeLinearizable && cur.leader != 0 {
		if a := c.cache.address(cur.leader); usable(a) {
			return a
		}
	}
	reps := cur.desc.GetReplicas()
	start := int(c.replicaTurn.Load() % uint64(max(len(reps), 1)))
	for i := range reps {
		rd := reps[(start+i)%len(reps)]
		if mode == hedgeLinearizable && rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_LEARNER {
			continue
		}
		if a := c.cache.address(rd.GetNodeId()); usable(a) {
			return a
		}
	}
	return ""
}

// hedgeWon records that a hedge of a read routed with ent was answered by
// winner: for a linearizable read, winner leads the range.
func (c *Client) hedgeWon(ent *rangeEntry, mode hedgeMode, winner string) {
	if mode != hedgeLinearizable {
		return
	}
	for _, rd := range ent.desc.GetReplicas() {
		if c.cache.address(rd.GetNodeId()) == winner {
			c.cache.hint(ent.desc.GetRangeId(), rd.GetNodeId(), 0, ent)
			return
		}
	}
}

// namesLeader reports whether err is a NotLeader answer naming a leader.
func namesLeader(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if nl, ok := d.(*kvpb.NotLeader); ok && nl.GetLeader().GetNodeId() != 0 {
			return true
		}
	}
	return false
}
