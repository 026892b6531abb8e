package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// Routing (docs/sharding.md, "Client routing").
//
// A request goes to the range holding its key, found in the range cache
// (rangecache.go) or, on a miss, with one RangeLookup through any
// endpoint, which also prefetches the following ranges. It is sent to the
// range's leader when known, else to its replicas in turn, naming the
// range and the generation it was routed with. The answers that say the
// routing was wrong (NotLeader, RangeKeyMismatch, RangeNotFound) carry
// what the node knows - the leader, the current descriptors - which goes
// into the cache before the next attempt; such an attempt changed
// nothing, so it is retried at once, then with jittered exponential
// backoff, until the caller's deadline.

// routeKey says which range a request goes to: the one holding key, or
// with before set, the one holding the keys just below key (the last range
// when key is empty), for reverse scans.
type routeKey struct {
	key    []byte
	before bool
	// spread: a bounded-staleness read, which any replica may serve; its
	// first attempt goes to the replicas in turn rather than the leader
	// (later attempts, after a replica sent it to the leader, as usual).
	spread bool
}

// lookupPrefetch is how many following ranges a RangeLookup asks for.
const lookupPrefetch = 8

// endpointFor returns the endpoint of address addr, dialling it if the
// client has no connection to it yet.
func (c *Client) endpointFor(addr string) (*endpoint, error) {
	c.extra.Lock()
	defer c.extra.Unlock()
	for _, e := range c.conns {
		if e.addr == addr {
			return e, nil
		}
	}
	if e := c.extra.conns[addr]; e != nil {
		return e, nil
	}
	if c.closed.Load() {
		return nil, &Error{Op: "dial", Endpoint: addr, Msg: "the client is closed", kind: ErrClosed}
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, c.dialOpts...)
	if err != nil {
		return nil, &Error{Op: "dial", Endpoint: addr, Msg: err.Error(), kind: ErrUnavailable, cause: err}
	}
	e := c.newEndpoint(addr, cc)
	if c.extra.conns == nil {
		c.extra.conns = map[string]*endpoint{}
	}
	c.extra.conns[addr] = e
	return e, nil
}

// extraConns are connections to nodes learned from the cluster.
type extraConns struct {
	sync.Mutex
	conns map[string]*endpoint
}

// locate returns the range for rk, from the cache or a RangeLookup.
func (c *Client) locate(ctx context.Context, op string, rk routeKey) (*rangeEntry, error) {
	if ent := c.cachedRange(rk); ent != nil {
		return ent, nil
	}
	key := rk.key
	last := rk.before && len(rk.key) == 0 // the last range: walk to it
	switch {
	case last:
		key = []byte{0xff}
	case rk.before:
		key = kvpb.KeyBefore(rk.key)
	}
	for i := 0; i < 64; i++ {
		// A stale lookup (from the answering node's copy of meta) is
		// enough: the range itself checks the routing, and answers a stale
		// one with its current descriptors.
		req := &kvpb.RangeLookupRequest{Key: key, Prefetch: lookupPrefetch, Stale: true}
		var resp *kvpb.RangeLookupResponse
		err := c.do(ctx, op, false, func(ctx context.Context, e *endpoint) (err error) {
			resp, err = e.admin.RangeLookup(ctx, req)
			return err
		})
		if err != nil {
			return nil, err
		}
		c.learnLookup(resp)
		if ent := c.cachedRange(rk); ent != nil {
			return ent, nil
		}
		rs := resp.GetRanges()
		if !last || len(rs) == 0 || len(rs[len(rs)-1].GetEndKey()) == 0 {
			break
		}
		key = rs[len(rs)-1].GetEndKey()
	}
	return nil, nil // meta is catching up with a split: retry
}

func (c *Client) cachedRange(rk routeKey) *rangeEntry {
	if rk.before {
		return c.cache.lookupBefore(rk.key)
	}
	return c.cache.lookup(rk.key)
}

func (c *Client) learnLookup(resp *kvpb.RangeLookupResponse) {
	for _, n := range resp.GetNodes() {
		c.cache.addNode(n)
	}
	for i, d := range resp.GetRanges() {
		var leader uint64
		if i < len(resp.GetLeaders()) {
			leader = resp.GetLeaders()[i].GetNodeId()
			c.cache.addNode(resp.GetLeaders()[i])
		}
		c.cache.insert(d, leader)
	}
}

// learn updates the cache from a failed attempt on ent; it reports whether
// the answer was about routing (so an immediate retry is worth it).
func (c *Client) learn(err error, ent *rangeEntry) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	routing := false
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *kvpb.NotLeader:
			routing = true
			leader, term := d.GetLeader().GetNodeId(), d.GetLeaderTerm()
			c.cache.addNode(d.GetLeader())
			if d.GetRange() != nil && d.GetRange().GetGeneration() > ent.desc.GetGeneration() {
				c.cache.insertTerm(d.GetRange(), leader, term)
			}
			c.cache.hint(d.GetRangeId(), leader, term, ent)
			if leader == 0 {
				c.replicaTurn.Add(1)
			}
		case *kvpb.RangeKeyMismatch:
			routing = true
			c.cache.evict(ent.desc.GetRangeId())
			for i, r := range d.GetRanges() {
				var leader uint64
				if i < len(d.GetLeaders()) {
					leader = d.GetLeaders()[i].GetNodeId()
					c.cache.addNode(d.GetLeaders()[i])
				}
				c.cache.insert(r, leader)
			}
		case *kvpb.RangeNotFound:
			routing = true
			c.cache.evict(ent.desc.GetRangeId())
		}
	}
	if !routing && (st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded) {
		// Try another replica next.
		c.rotate(ent)
	}
	return routing
}

// rotate forgets ent's leader (unless another request has learnt a
// different one meanwhile) and moves the next attempt without one to the
// next replica.
func (c *Client) rotate(ent *rangeEntry) {
	c.cache.forgetLeader(ent.desc.GetRangeId(), ent)
	c.replicaTurn.Add(1)
}

// target returns the address to send a request for ent to: the leader if
// known, else the replicas in turn (skipping those without a known
// address); "" if none is known. A suspect node (one that just failed to
// answer in time, attempt.go) is passed over, even as leader, while
// another voter is left.
func (c *Client) target(ent *rangeEntry) string {
	if ent.leader != 0 {
		if a := c.cache.address(ent.leader); a != "" && !c.suspects.has(a) {
			return a
		}
	}
	reps := ent.desc.GetReplicas()
	if len(reps) == 0 {
		return ""
	}
	start := int(c.replicaTurn.Load() % uint64(len(reps)))
	suspect := ""
	for i := range reps {
		rd := reps[(start+i)%len(reps)]
		if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_LEARNER {
			continue
		}
		if a := c.cache.address(rd.GetNodeId()); a != "" {
			if !c.suspects.has(a) {
				return a
			}
			if suspect == "" {
				suspect = a
			}
		}
	}
	return suspect
}

// spreadTarget returns the replica of ent that the next bounded-staleness
// read goes to: the replicas (voters and learners) in turn, passing over
// suspects and replicas with no known address; fallback when none is
// left.
func (c *Client) spreadTarget(ent *rangeEntry, fallback string) string {
	reps := ent.desc.GetReplicas()
	if len(reps) == 0 {
		return fallback
	}
	start := int(c.spreadTurn.Add(1) % uint64(len(reps)))
	for i := range reps {
		rd := reps[(start+i)%len(reps)]
		if a := c.cache.address(rd.GetNodeId()); a != "" && !c.suspects.has(a) {
			return a
		}
	}
	return fallback
}

// routed runs call against the range for rk until it succeeds, fails for
// good, or ctx ends. call gets the range it is routed to; it must put the
// range's ID and generation in its request header (routeHeader).
func (c *Client) routed(ctx context.Context, op string, write bool, rk routeKey,
	call func(context.Context, *endpoint, *kvpb.RangeDescriptor) error) error {
	return c.route(ctx, op, write, noHedge, rk, call)
}

// route is routed with its attempts hedged as hedge says (hedge.go).
func (c *Client) route(ctx context.Context, op string, write bool, hedge hedgeMode, rk routeKey,
	call func(context.Context, *endpoint, *kvpb.RangeDescriptor) error) error {
	if c.closed.Load() {
		return &Error{Op: op, Msg: "the client is closed", kind: ErrClosed}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RequestTimeout)
		defer cancel()
	}
	var last *Error
	quick := 0
	// timedOut counts attempts that got no answer in time; inFlight says
	// a write was among them, which may still apply (attempt.go).
	timedOut, inFlight := 0, false
	// unreached are the nodes this request could not reach or that said
	// the range has no quorum; once they are every voter of the range,
	// the no-quorum answer is final (noquorum.go).
	var unreached map[string]bool
	fail := func(e *Error) error {
		if inFlight && e.kind != ErrAmbiguous {
			return mayStillApply(e)
		}
		return e
	}
	for attempt := 0; ; attempt++ {
		var retryAfter time.Duration
		routing := false
		ent, err := c.locate(ctx, op, rk)
		switch {
		case err != nil:
			var e *Error
			if asError(err, &e) && !(e.kind == ErrUnavailable && ctx.Err() == nil) {
				return fail(e)
			}
			last = e
		case ent == nil:
			last = &Error{Op: op, Msg: "meta holds no range for the key yet", kind: ErrUnavailable}
		default:
			addr := c.target(ent)
			if rk.spread && attempt == 0 {
				addr = c.spreadTarget(ent, addr)
			}
			var e *endpoint
			if addr == "" {
				last = &Error{Op: op, Msg: "no address known for any replica of the range", kind: ErrUnavailable}
				c.cache.evict(ent.desc.GetRangeId())
			} else if e, err = c.endpointFor(addr); err != nil {
				return fail(asClientError(err))
			} else if err := waitReadyFor(ctx, e, connectWait); err != nil {
				if ctx.Err() != nil {
					if last != nil {
						return fail(last)
					}
					return fail(contextEnded(op, addr, ctx.Err()))
				}
				last = &Error{Op: op, Endpoint: addr, Msg: err.Error(), kind: ErrUnavailable, cause: err}
				unreached = addTo(unreached, addr)
				// A node that cannot be reached is avoided as one that
				// did not answer in time is (attempt.go): its ranges are
				// electing leaders in its place.
				c.suspects.mark(addr, c.suspectFor())
				c.rotate(ent)
			} else {
				limit := c.attemptLimit(ctx, timedOut)
				actx, cancel := withAttemptTimeout(ctx, limit)
				answered, err := c.hedgedAttempt(actx, hedge, ent, addr, e, call)
				expired := attemptExpired(actx, ctx, err)
				cancel()
				if err == nil {
					c.suspects.clear(answered)
					return nil
				}
				var ce *Error
				if asError(err, &ce) {
					return fail(ce) // the caller's own verdict, nothing was sent
				}
				if expired {
					// A gray failure: the node may be paused. Avoid it for
					// a while and try another replica at once.
					timedOut++
					inFlight = inFlight || write
					unreached = addTo(unreached, addr)
					c.suspects.mark(addr, c.suspectFor())
					c.rotate(ent)
					kind := ErrUnavailable
					if write {
						kind = ErrAmbiguous
					}
					last = &Error{Op: op, Endpoint: addr, Code: codes.DeadlineExceeded, kind: kind, cause: err,
						Msg: fmt.Sprintf("no answer from %s within the attempt timeout of %v", describeRange(ent.desc), limit)}
					continue
				}
				cl := classify(op, addr, write, err, ctx.Err())
				routing = c.learn(err, ent)
				if !cl.retry {
					return fail(cl.err)
				}
				if cl.noQuorum != nil {
					// Final once every voter has been tried: this node may
					// be the one cut off from the others.
					unreached = addTo(unreached, addr)
					if c.allVotersIn(ent, unreached) {
						return fail(cl.err)
					}
					c.rotate(ent)
					last = cl.err
					continue
				}
				last, retryAfter = cl.err, cl.retryAfter
				if routing && retryAfter == 0 && c.failingOver(ent.desc.GetRangeId()) {
					// The replicas still name the node that stopped
					// answering, or no leader while one of them is that
					// node: an election is due or under way. Poll for its
					// outcome at a steady pace rather than backing off
					// past it.
					if !sleep(ctx, c.electionPoll()) {
						return fail(last)
					}
					continue
				}
			}
		}
		// A routing answer taught us something: retry at once, a few
		// times in a row; otherwise back off.
		if routing && quick < 3 && retryAfter == 0 {
			quick++
			continue
		}
		quick = 0
		// The backoff between attempts at a range is capped at half an
		// attempt timeout (about half an election timeout), so that a
		// request notices a new leader, or that the range has lost its
		// quorum, within about an election timeout of it.
		if !sleep(ctx, max(retryAfter, min(c.backoff(attempt), c.opts.AttemptTimeout/2))) {
			if last == nil {
				return fail(contextEnded(op, "", context.DeadlineExceeded))
			}
			return fail(last)
		}
	}
}

// asClientError returns err as an *Error (it is one).
func asClientError(err error) *Error {
	var e *Error
	if asError(err, &e) {
		return e
	}
	return &Error{Msg: err.Error(), kind: ErrInternal, cause: err}
}

// routeHeader fills h's routing fields for d.
func routeHeader(h *kvpb.RequestHeader, d *kvpb.RangeDescriptor) *kvpb.RequestHeader {
	h.RangeId, h.RangeGeneration = d.GetRangeId(), d.GetGeneration()
	return h
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	if ok {
		*target = e
	}
	return ok
}

// describeRange is a short description of d for error messages.
func describeRange(d *kvpb.RangeDescriptor) string {
	end := "+inf"
	if len(d.GetEndKey()) > 0 {
		end = fmt.Sprintf("%q", d.GetEndKey())
	}
	return fmt.Sprintf("range %d [%q, %s)", d.GetRangeId(), d.GetStartKey(), end)
}

// connectWait bounds the wait for a connection to one replica before the
// next is tried (nothing was sent to it).
const connectWait = time.Second

// waitReadyFor waits up to d (and ctx) for e's connection.
func waitReadyFor(ctx context.Context, e *endpoint, d time.Duration) error {
	if e.cc.GetState() == connectivity.Ready {
		// The common case costs no timer.
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := e.waitReady(wctx)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return fmt.Errorf("no connection to %s within %v", e.addr, d)
	}
	return err
}

// mayStillApply turns the final error e of a write, one of whose earlier
// attempts got no answer in time, into ErrAmbiguous: that attempt may
// still apply, whatever the last one said. The result wraps e's cause, not
// e: errors.Is must match ErrAmbiguous alone, never e's own kind (a caller
// testing ErrUnavailable first would take the write as not applied).
func mayStillApply(e *Error) *Error {
	return &Error{Op: e.Op, Endpoint: e.Endpoint, Code: e.Code, Write: e.Write, kind: ErrAmbiguous, cause: e.cause,
		Msg: "an earlier attempt got no answer in time and may still apply; the last attempt: " + e.Error()}
}
