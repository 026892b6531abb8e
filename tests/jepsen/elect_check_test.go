package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/client/concurrency"
)

// The election workload and its checker (docs/testing.md, docs/leases.md
// "Elections"). Campaigners (client/concurrency, sessions with leaseTTL)
// campaign in one election; elected, each leads for a while, proclaiming
// a new value every proclaimEvery, then resigns. An observer follows the
// election (Observe). The checker:
//
//   - two leaders never overlap: a leader elected before an earlier
//     leader (lower Rev) stopped leading (sent its resign, or saw a
//     Proclaim fail or its session end), while that leader's lease was
//     still guaranteed alive (the TTL after its last acknowledged
//     keep-alive), is a violation;
//   - the observer sees leaders in election order: the create versions
//     it reports never fall;
//   - every leader the observer reports with a value a campaigner
//     proclaimed (not its campaign value) was one that campaigner got
//     elected as: its create version is that term's Rev.
//
// TestElectionCheckCatchesPlantedBug shows it catching overlapping
// leaders when keep-alives are acknowledged without renewing the lease.

// electTerm is one campaigner's term as leader.
type electTerm struct {
	worker int
	rev    client.Timestamp
	key    string
	// elected: when Campaign returned; endCall: when the leader stopped
	// acting as one; aliveUntil: its lease's guaranteed life then.
	elected, endCall, aliveUntil time.Time
	proclaims                    int
}

// observed is one leader Observe reported.
type observed struct {
	at     time.Time
	key    string
	value  string
	create client.Timestamp
}

type electWorkload struct {
	hold          func(r *rand.Rand) time.Duration // how long a term lasts
	proclaimEvery time.Duration
	mu            sync.Mutex
	terms         []*electTerm
	seen          []observed
	failures      int
}

func (w *electWorkload) failed() {
	w.mu.Lock()
	w.failures++
	w.mu.Unlock()
}

// worker campaigns until ctx ends, with one session at a time.
func (w *electWorkload) worker(ctx context.Context, i int, sess *session, rng *rand.Rand) {
	var s *concurrency.Session
	defer func() {
		if s != nil {
			cctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			s.Close(cctx)
			cancel()
		}
	}()
	for ctx.Err() == nil {
		if s == nil {
			sctx, cancel := context.WithTimeout(ctx, opTimeout)
			var err error
			s, err = concurrency.NewSession(sctx, sess.get(), leaseTTL)
			cancel()
			if err != nil {
				s = nil
				w.failed()
				pause(ctx, 200*time.Millisecond)
				continue
			}
		}
		w.term(ctx, i, s, rng)
		select {
		case <-s.Done():
			s = nil // lost: a new one next term
		default:
		}
		pause(ctx, time.Duration(rng.Int64N(int64(100*time.Millisecond))))
	}
}

func (w *electWorkload) term(ctx context.Context, i int, s *concurrency.Session, rng *rand.Rand) {
	e := concurrency.NewElection(s, "jelect")
	cctx, cancel := context.WithTimeout(ctx, 3*leaseTTL)
	err := e.Campaign(cctx, []byte(fmt.Sprintf("w%d", i)))
	cancel()
	if err != nil {
		w.failed()
		return
	}
	t := &electTerm{worker: i, rev: e.Rev(), key: string(e.Key()), elected: time.Now()}
	defer func() {
		w.mu.Lock()
		w.terms = append(w.terms, t)
		w.mu.Unlock()
	}()
	until := time.Now().Add(w.hold(rng))
	for time.Now().Before(until) && ctx.Err() == nil {
		select {
		case <-s.Done():
			t.endCall, t.aliveUntil = time.Now(), s.AliveUntil()
			return
		case <-time.After(w.proclaimEvery):
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, opTimeout)
		err := e.Proclaim(pctx, []byte(fmt.Sprintf("w%d/%d", i, t.proclaims+1)))
		cancel()
		if err != nil {
			// Not known to lead any more (or not known to still lead):
			// stop acting as the leader.
			t.endCall, t.aliveUntil = time.Now(), s.AliveUntil()
			w.failed()
			rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			e.Resign(rctx) //nolint:errcheck // the lease deletes it otherwise
			cancel()
			return
		}
		t.proclaims++
	}
	t.endCall, t.aliveUntil = time.Now(), s.AliveUntil()
	rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	if err := e.Resign(rctx); err != nil {
		w.failed()
	}
	cancel()
}

// observer records the leaders Observe reports until ctx ends.
func (w *electWorkload) observer(ctx context.Context, sess *session) {
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, opTimeout)
		s, err := concurrency.NewSession(sctx, sess.get(), leaseTTL)
		cancel()
		if err != nil {
			w.failed()
			pause(ctx, 200*time.Millisecond)
			continue
		}
		// Observe reads and watches with the session's client only: it
		// goes on when the session's lease is lost.
		for l := range concurrency.NewElection(s, "jelect").Observe(ctx) {
			w.mu.Lock()
			w.seen = append(w.seen, observed{at: time.Now(), key: string(l.Key), value: string(l.Value), create: l.CreateVersion})
			w.mu.Unlock()
		}
		cctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		s.Close(cctx)
		cancel()
	}
}

// electCheck is the checker's verdict.
type electCheck struct {
	terms, proclaims, seen int
	overlaps               []string
	unordered              []string
	unknown                []string
}

func (c electCheck) problems() []string {
	var out []string
	if len(c.overlaps) > 0 {
		out = append(out, fmt.Sprintf("%d leaders elected while an earlier leader's lease was alive and it still led, e.g. %v", len(c.overlaps), first(c.overlaps, 5)))
	}
	if len(c.unordered) > 0 {
		out = append(out, fmt.Sprintf("%d times the observer saw a leader older than one it had seen, e.g. %v", len(c.unordered), first(c.unordered, 5)))
	}
	if len(c.unknown) > 0 {
		out = append(out, fmt.Sprintf("%d proclaimed values observed on a leader no campaigner was elected as, e.g. %v", len(c.unknown), first(c.unknown, 5)))
	}
	return out
}

// checkElections checks the terms and what the observer saw.
func checkElections(terms []*electTerm, seen []observed) electCheck {
	c := electCheck{seen: len(seen)}
	termOf := map[string][]client.Timestamp{} // a campaigner's key -> its terms' revs
	for _, a := range terms {
		c.terms++
		c.proclaims += a.proclaims
		termOf[a.key] = append(termOf[a.key], a.rev)
		end := a.endCall
		if a.aliveUntil.Before(end) {
			end = a.aliveUntil
		}
		for _, b := range terms {
			// b's key was the lowest only once a's key was gone; a's key
			// goes only after a's resign or the end of its lease.
			if a.rev.Less(b.rev) && b.elected.Before(end) {
				c.overlaps = append(c.overlaps, fmt.Sprintf("worker %d (rev %v) elected at %v before worker %d (rev %v) stopped leading or its lease could end",
					b.worker, b.rev, b.elected.Format("15:04:05.000"), a.worker, a.rev))
			}
		}
	}
	for i, o := range seen {
		if i > 0 && o.create.Less(seen[i-1].create) {
			c.unordered = append(c.unordered, fmt.Sprintf("%s (create %v) at %v after %s (create %v)",
				o.key, o.create, o.at.Format("15:04:05.000"), seen[i-1].key, seen[i-1].create))
		}
		if !strings.Contains(o.value, "/") {
			continue // a campaign value: its campaigner may not have seen it lead
		}
		ok := false
		for _, r := range termOf[o.key] {
			ok = ok || r == o.create
		}
		if !ok {
			c.unknown = append(c.unknown, fmt.Sprintf("%s=%s (create %v) at %v", o.key, o.value, o.create, o.at.Format("15:04:05.000")))
		}
	}
	sort.Strings(c.overlaps)
	return c
}
