package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/shaledb/shale/client"
)

// The lease workload and its checker (docs/testing.md, docs/leases.md).
// Each worker runs lease sessions one after another: grant a lease
// (TTL leaseTTL), put a key of its own with it, keep it alive for a few
// seconds while reading the key, then revoke it or let it expire. The
// checker holds the cluster to the lease rules:
//
//   - no key goes early: a read that finds a session's key absent, started
//     after its leased put was acknowledged and ended before its deadline
//     (the TTL after the latest send of a keep-alive that was acknowledged,
//     or of the grant) and before any revoke was sent, is a violation;
//   - a revoke that was acknowledged has deleted the key: a read started
//     after it that finds the key is a violation;
//   - every key goes within leaseBound of its deadline: after the run, once
//     every deadline plus leaseBound has passed, a key still present is a
//     violation.
//
// Only the lease deletes these keys (each session's key is its own), so a
// key's absence is the lease's doing. TestLeaseCheckCatchesPlantedBug
// shows the checker catching keep-alives that are acknowledged without
// renewing the lease.

// leaseTTL is the workload's lease TTL.
const leaseTTL = 5 * time.Second

// leaseBound is how long after its deadline a lease's key may still be
// there: one TTL more if meta's leader changed (the new leader gives every
// lease a full TTL), the attach window the sweep waits out (5 s), and 10 s
// for the lessor's tick, the sweep's writes and a loaded machine.
const leaseBound = leaseTTL + 5*time.Second + 10*time.Second

// leaseRead is one read of a session's key.
type leaseRead struct {
	call, ret time.Time
	found     bool
}

// leaseSession is one lease's history as its worker saw it.
type leaseSession struct {
	id      client.LeaseID
	key     string
	granted time.Time // the grant's send
	// putOK: the leased put was acknowledged, at putRet; putTried: it was
	// sent (it may have applied).
	putOK, putTried bool
	putRet          time.Time
	acks            []time.Time // sends of acknowledged keep-alives
	revokeSent      time.Time   // a revoke was sent (zero: none)
	revoked         bool        // a revoke was acknowledged, at revokeRet
	revokeRet       time.Time
	reads           []leaseRead
}

// deadline is the earliest the lease may expire: the TTL after the latest
// acknowledged send.
func (s *leaseSession) deadline() time.Time {
	last := s.granted
	for _, a := range s.acks {
		if a.After(last) {
			last = a
		}
	}
	return last.Add(leaseTTL)
}

type leaseWorkload struct {
	mu       sync.Mutex
	sessions []*leaseSession
	failures int // grants, puts, keep-alives and reads that failed
}

func (w *leaseWorkload) add(s *leaseSession) {
	w.mu.Lock()
	w.sessions = append(w.sessions, s)
	w.mu.Unlock()
}

func (w *leaseWorkload) failed() {
	w.mu.Lock()
	w.failures++
	w.mu.Unlock()
}

// worker runs lease sessions until ctx ends.
func (w *leaseWorkload) worker(ctx context.Context, i int, sess *session, rng *rand.Rand) {
	for n := 0; ctx.Err() == nil; n++ {
		w.runSession(ctx, sess.get(), fmt.Sprintf("lease/%02d/%06d", i, n), rng)
	}
}

func (w *leaseWorkload) runSession(ctx context.Context, cl *client.Client, key string, rng *rand.Rand) {
	call := func(d time.Duration, f func(context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return f(cctx)
	}
	s := &leaseSession{key: key, granted: time.Now()}
	if err := call(opTimeout, func(ctx context.Context) (err error) {
		s.id, err = cl.Grant(ctx, leaseTTL)
		return err
	}); err != nil {
		w.failed()
		pause(ctx, 200*time.Millisecond)
		return
	}
	defer w.add(s)
	s.putTried = true
	if err := call(opTimeout, func(ctx context.Context) error {
		return cl.Put(ctx, []byte(key), []byte("held"), client.WithLease(s.id))
	}); err != nil {
		w.failed()
	} else {
		s.putOK, s.putRet = true, time.Now()
	}
	read := func() {
		r := leaseRead{call: time.Now()}
		err := call(time.Second, func(ctx context.Context) (err error) {
			_, r.found, err = cl.Get(ctx, []byte(key))
			return err
		})
		r.ret = time.Now()
		if err != nil {
			w.failed()
			return
		}
		s.reads = append(s.reads, r)
	}
	hold := time.Now().Add(3*time.Second + time.Duration(rng.Int64N(int64(5*time.Second))))
	for time.Now().Before(hold) && ctx.Err() == nil {
		sent := time.Now()
		err := call(leaseTTL/3, func(ctx context.Context) error {
			_, err := cl.KeepAliveOnce(ctx, s.id)
			return err
		})
		switch {
		case err == nil:
			s.acks = append(s.acks, sent)
		case errors.Is(err, client.ErrNotFound):
			hold = time.Now() // the lease is gone: end the session
		default:
			w.failed()
		}
		read()
		pause(ctx, leaseTTL/6)
	}
	if ctx.Err() != nil || rng.IntN(2) == 0 {
		return // left to expire
	}
	s.revokeSent = time.Now()
	if err := call(2*opTimeout, func(ctx context.Context) error {
		_, err := cl.Revoke(ctx, s.id)
		return err
	}); err == nil {
		s.revoked, s.revokeRet = true, time.Now()
		read()
	} else if !errors.Is(err, client.ErrNotFound) {
		w.failed()
	}
}

// lastDeadline is the latest deadline of any session.
func (w *leaseWorkload) lastDeadline() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	for _, s := range w.sessions {
		if d := s.deadline(); d.After(last) {
			last = d
		}
	}
	return last
}

// leaseCheck is the checker's verdict.
type leaseCheck struct {
	sessions, kept, revoked int // sessions, with acknowledged keep-alives, revoked
	early                   []string
	afterRevoke             []string
	outlived                []string
}

func (c leaseCheck) problems() []string {
	var out []string
	if len(c.early) > 0 {
		out = append(out, fmt.Sprintf("%d lease keys went before their TTL since the last acknowledged keep-alive, e.g. %v", len(c.early), first(c.early, 5)))
	}
	if len(c.afterRevoke) > 0 {
		out = append(out, fmt.Sprintf("%d lease keys were read after their lease's revoke was acknowledged, e.g. %v", len(c.afterRevoke), first(c.afterRevoke, 5)))
	}
	if len(c.outlived) > 0 {
		out = append(out, fmt.Sprintf("%d lease keys outlived their lease by more than %v, e.g. %v", len(c.outlived), leaseBound, first(c.outlived, 5)))
	}
	return out
}

// checkLeases checks the sessions; final holds the keys present in a read
// made at finalAt, once every deadline plus leaseBound had passed (nil:
// no final read).
func checkLeases(sessions []*leaseSession, final map[string]bool, finalAt time.Time) leaseCheck {
	var c leaseCheck
	for _, s := range sessions {
		c.sessions++
		if len(s.acks) > 0 {
			c.kept++
		}
		if s.revoked {
			c.revoked++
		}
		d := s.deadline()
		for _, r := range s.reads {
			// A revoke sent before the read returned may have deleted
			// the key: only reads before it count.
			beforeRevoke := s.revokeSent.IsZero() || r.ret.Before(s.revokeSent)
			if s.putOK && !r.found && r.call.After(s.putRet) && r.ret.Before(d) && beforeRevoke {
				c.early = append(c.early, fmt.Sprintf("%s (lease %d) absent %v before its deadline", s.key, s.id, d.Sub(r.ret).Round(time.Millisecond)))
				break
			}
			if s.revoked && r.found && r.call.After(s.revokeRet) {
				c.afterRevoke = append(c.afterRevoke, fmt.Sprintf("%s (lease %d) read %v after the revoke", s.key, s.id, r.call.Sub(s.revokeRet).Round(time.Millisecond)))
				break
			}
		}
		if final != nil && s.putTried && final[s.key] && finalAt.After(d.Add(leaseBound)) {
			c.outlived = append(c.outlived, fmt.Sprintf("%s (lease %d) present %v after its deadline", s.key, s.id, finalAt.Sub(d).Round(time.Millisecond)))
		}
	}
	sort.Strings(c.early)
	sort.Strings(c.afterRevoke)
	sort.Strings(c.outlived)
	return c
}

// readLeaseKeys reads every key of the lease workload.
func readLeaseKeys(cl *client.Client, timeout time.Duration) (map[string]bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		out := map[string]bool{}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var err error
		for kv, e := range cl.Scan(ctx, []byte("lease/"), []byte("lease0"), nil) {
			if e != nil {
				err = e
				break
			}
			out[string(kv.Key)] = true
		}
		cancel()
		if err == nil {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("final read of the lease keys: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// finishLeases waits until every deadline plus leaseBound has passed,
// reads the lease keys and checks the sessions.
func finishLeases(w *leaseWorkload, cl *client.Client) (leaseCheck, error) {
	if wait := time.Until(w.lastDeadline().Add(leaseBound)); wait > 0 {
		time.Sleep(wait + 100*time.Millisecond)
	}
	at := time.Now() // the keys read were present at or after it
	final, err := readLeaseKeys(cl, 30*time.Second)
	if err != nil {
		return leaseCheck{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return checkLeases(w.sessions, final, at), nil
}
