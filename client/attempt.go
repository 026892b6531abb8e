package client

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Gray failures (docs/sharding.md, "Client routing"; docs/operations.md,
// "Failures").
//
// A node that is paused (SIGSTOP, a long GC, a stalled VM) keeps its
// connections up but answers nothing. Without a bound below the caller's
// deadline, a request sent to it would wait that whole deadline. So each
// attempt has its own timeout (Options.AttemptTimeout, doubling with each
// attempt of the same request that timed out, so that a request that is
// merely slow still completes), and a node that just timed out is
// suspect: for a short while requests go to its peers rather than to it,
// even when a hint names it leader, unless no other replica is left.
//
// A read that timed out is retried elsewhere. A write that timed out may
// have been applied; it is retried with the same client_id and
// request_seq, which the range deduplicates (docs/replication.md,
// "Ambiguity and deduplication"), so it is applied at most once. If no
// later attempt succeeds, the write's error is ErrAmbiguous: the attempt
// that timed out may still apply.

// attemptTimeout is the timeout of the attempt that follows timedOut
// attempts of the same request that timed out: AttemptTimeout doubled for
// each, at most maxAttemptDoublings times.
func (c *Client) attemptTimeout(timedOut int) time.Duration {
	return c.opts.AttemptTimeout << min(timedOut, maxAttemptDoublings)
}

const maxAttemptDoublings = 4

// waitingAttemptKey carries, in a request's context, the attempt timeout
// of a call that waits on purpose at the node (a locking read waits in
// the leader's queue for up to three quarters of its attempt,
// txn_lock.go): longer than AttemptTimeout, so that a long queue is
// waited out in place rather than left and joined again at its tail.
type waitingAttemptKey struct{}

// withWaitingAttempt marks ctx's requests as waiting ones, with attempt
// timeout at least d.
func withWaitingAttempt(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, waitingAttemptKey{}, d)
}

// attemptLimit is attemptTimeout, or the longer timeout of a waiting
// call (withWaitingAttempt).
func (c *Client) attemptLimit(ctx context.Context, timedOut int) time.Duration {
	l := c.attemptTimeout(timedOut)
	if d, ok := ctx.Value(waitingAttemptKey{}).(time.Duration); ok && d > l {
		l = d
	}
	return l
}

// withAttemptTimeout returns the context of one attempt: ctx bounded by d.
func withAttemptTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// attemptExpired says whether an attempt that failed with err ran out of
// its own timeout (actx) while the request's deadline (ctx) holds. The
// node sees the same deadline (gRPC sends it along) and may end the call
// first: its DeadlineExceeded or RST_STREAM CANCEL can arrive a moment
// before the client's own timer fires, so an error of that kind within
// attemptDeadlineSlack of the attempt's deadline counts as expiry too.
// (Taken for a final answer, such an error failed a read that a retry
// would have served.)
func attemptExpired(actx, ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	if actx.Err() == context.DeadlineExceeded {
		return true
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled:
		dl, ok := actx.Deadline()
		return ok && time.Until(dl) < attemptDeadlineSlack
	}
	return false
}

// attemptDeadlineSlack is how close to its deadline an attempt ended by
// the node counts as timed out (the two clocks' timers and the network
// between them).
const attemptDeadlineSlack = 100 * time.Millisecond

// suspects are the addresses that failed to answer an attempt in time,
// each until when it is avoided. It is safe for concurrent use.
type suspects struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// mark avoids addr for d.
func (s *suspects) mark(addr string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until == nil {
		s.until = map[string]time.Time{}
	}
	s.until[addr] = time.Now().Add(d)
}

// clear ends the suspicion of addr (it answered).
func (s *suspects) clear(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.until, addr)
}

// has reports whether addr is avoided now.
func (s *suspects) has(addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.until[addr]
	if ok && time.Now().After(t) {
		delete(s.until, addr)
		return false
	}
	return ok
}

// suspectFor is how long a node that timed out is avoided: long enough
// for the range's other replicas to elect a new leader in its place.
func (c *Client) suspectFor() time.Duration {
	return max(2*c.opts.AttemptTimeout, time.Second)
}

// leaderSuspect reports whether the cached leader of range rangeID is a
// suspect node.
func (c *Client) leaderSuspect(rangeID uint64) bool {
	ent := c.cache.entry(rangeID)
	if ent == nil || ent.leader == 0 {
		return false
	}
	a := c.cache.address(ent.leader)
	return a != "" && c.suspects.has(a)
}

// failingOver reports whether range rangeID is replacing a leader that
// stopped answering: its cached leader is a suspect node, or it has no
// known leader and one of its voters is suspect. Both last only as long
// as the suspicion (suspectFor), so a range without a quorum is not
// polled at this pace for long.
func (c *Client) failingOver(rangeID uint64) bool {
	if c.leaderSuspect(rangeID) {
		return true
	}
	ent := c.cache.entry(rangeID)
	if ent == nil || ent.leader != 0 {
		return false
	}
	for _, rd := range ent.desc.GetReplicas() {
		if a := c.cache.address(rd.GetNodeId()); a != "" && c.suspects.has(a) {
			return true
		}
	}
	return false
}

// electionPoll is the wait between attempts while the replicas still name
// a suspect node leader: a tenth of the attempt timeout (about an
// election timeout), jittered.
func (c *Client) electionPoll() time.Duration {
	d := c.opts.AttemptTimeout / 10
	return d/2 + rand.N(d/2+1)
}
