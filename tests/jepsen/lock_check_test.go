package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/client/concurrency"
)

// The lock workload and its checker (docs/testing.md, docs/leases.md
// "Locks"). Workers take turns holding one mutex (client/concurrency,
// sessions with leaseTTL); while holding, each makes fenced writes to one
// resource key: it reads the highest token written there and, unless that
// is above its own, writes its token with a compare-and-swap on the
// version it read. The checker:
//
//   - two holders never overlap: a holder whose lock was acquired before
//     an earlier-token holder released it, while that holder's lease was
//     still guaranteed alive (the TTL after its last acknowledged
//     keep-alive), is a violation;
//   - the fenced writes that succeeded, in version order, carry
//     non-decreasing tokens.
//
// TestLockCheckCatchesPlantedBug shows it catching overlapping holders
// when keep-alives are acknowledged without renewing the lease.

const lockResource = "lockres"

// lockHold is one holder's turn.
type lockHold struct {
	worker  int
	token   client.Timestamp
	lockRet time.Time // when Lock returned
	// endCall: when the holder stopped acting as one (Unlock sent, or the
	// session seen lost); aliveUntil: its lease's guaranteed life then.
	endCall, aliveUntil time.Time
	writes              []fencedWrite
	fenced              int // writes refused: a higher token was there
}

type fencedWrite struct {
	version client.Timestamp
	token   client.Timestamp
}

type lockWorkload struct {
	hold     func(r *rand.Rand) time.Duration // how long a turn lasts
	mu       sync.Mutex
	holds    []*lockHold
	failures int
}

func (w *lockWorkload) failed() {
	w.mu.Lock()
	w.failures++
	w.mu.Unlock()
}

func encodeToken(t client.Timestamp) []byte {
	return []byte(fmt.Sprintf("%d.%d", t.WallTime, t.Logical))
}

func decodeToken(b []byte) (client.Timestamp, error) {
	w, l, ok := strings.Cut(string(b), ".")
	wall, err1 := strconv.ParseInt(w, 10, 64)
	logical, err2 := strconv.ParseInt(l, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return client.Timestamp{}, fmt.Errorf("token %q", b)
	}
	return client.Timestamp{WallTime: wall, Logical: int32(logical)}, nil
}

// worker takes turns until ctx ends, with one session at a time.
func (w *lockWorkload) worker(ctx context.Context, i int, sess *session, rng *rand.Rand) {
	var s *concurrency.Session
	defer func() {
		if s != nil {
			cctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			s.Close(cctx)
			cancel()
		}
	}()
	for ctx.Err() == nil {
		cl := sess.get()
		if s == nil {
			sctx, cancel := context.WithTimeout(ctx, opTimeout)
			var err error
			s, err = concurrency.NewSession(sctx, cl, leaseTTL)
			cancel()
			if err != nil {
				s = nil
				w.failed()
				pause(ctx, 200*time.Millisecond)
				continue
			}
		}
		w.turn(ctx, i, cl, s, rng)
		select {
		case <-s.Done():
			s = nil // lost: a new one next turn
		default:
		}
		pause(ctx, time.Duration(rng.Int64N(int64(100*time.Millisecond))))
	}
}

func (w *lockWorkload) turn(ctx context.Context, i int, cl *client.Client, s *concurrency.Session, rng *rand.Rand) {
	m := concurrency.NewMutex(s, "jlock")
	lctx, cancel := context.WithTimeout(ctx, 3*leaseTTL)
	err := m.Lock(lctx)
	cancel()
	if err != nil {
		w.failed()
		return
	}
	h := &lockHold{worker: i, token: m.Token(), lockRet: time.Now()}
	defer func() {
		w.mu.Lock()
		w.holds = append(w.holds, h)
		w.mu.Unlock()
	}()
	until := time.Now().Add(w.hold(rng))
	for time.Now().Before(until) && ctx.Err() == nil {
		select {
		case <-s.Done():
			h.endCall, h.aliveUntil = time.Now(), s.AliveUntil()
			return
		default:
		}
		w.fencedWrite(ctx, cl, h)
		pause(ctx, 50*time.Millisecond)
	}
	h.endCall, h.aliveUntil = time.Now(), s.AliveUntil()
	uctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	if err := m.Unlock(uctx); err != nil {
		w.failed()
	}
	cancel()
}

// fencedWrite writes h's token to the resource unless a higher one is
// there, with a compare-and-swap on the version it read.
func (w *lockWorkload) fencedWrite(ctx context.Context, cl *client.Client, h *lockHold) {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	r, err := cl.GetVersioned(octx, []byte(lockResource))
	if err != nil {
		w.failed()
		return
	}
	cond := client.IfAbsent()
	if r.Found {
		cur, err := decodeToken(r.Value)
		if err != nil {
			w.failed()
			return
		}
		if h.token.Less(cur) {
			h.fenced++
			return
		}
		cond = client.IfVersion(r.Version)
	}
	res, err := cl.CompareAndSwap(octx, []byte(lockResource), cond, encodeToken(h.token))
	if err != nil {
		w.failed()
		return
	}
	if res.Succeeded {
		h.writes = append(h.writes, fencedWrite{version: res.Version, token: h.token})
	}
}

// lockCheck is the checker's verdict.
type lockCheck struct {
	holds, writes, fenced int
	overlaps              []string
	unordered             []string
}

func (c lockCheck) problems() []string {
	var out []string
	if len(c.overlaps) > 0 {
		out = append(out, fmt.Sprintf("%d lock holders overlapped a holder whose lease was alive, e.g. %v", len(c.overlaps), first(c.overlaps, 5)))
	}
	if len(c.unordered) > 0 {
		out = append(out, fmt.Sprintf("%d fenced writes succeeded with a token below an earlier write's, e.g. %v", len(c.unordered), first(c.unordered, 5)))
	}
	return out
}

// checkLocks checks the holds.
func checkLocks(holds []*lockHold) lockCheck {
	var c lockCheck
	var writes []fencedWrite
	for _, a := range holds {
		c.holds++
		c.fenced += a.fenced
		writes = append(writes, a.writes...)
		end := a.endCall
		if a.aliveUntil.Before(end) {
			end = a.aliveUntil
		}
		for _, b := range holds {
			// b's key was the lowest only once a's key was gone; a's key
			// goes only after a's unlock or the end of its lease.
			if a.token.Less(b.token) && b.lockRet.Before(end) {
				c.overlaps = append(c.overlaps, fmt.Sprintf("worker %d (token %v) held from %v before worker %d (token %v) stopped or its lease could end",
					b.worker, b.token, b.lockRet.Format("15:04:05.000"), a.worker, a.token))
			}
		}
	}
	c.writes = len(writes)
	sort.Slice(writes, func(i, j int) bool { return writes[i].version.Less(writes[j].version) })
	for i := 1; i < len(writes); i++ {
		if writes[i].token.Less(writes[i-1].token) {
			c.unordered = append(c.unordered, fmt.Sprintf("token %v at version %v after token %v at %v",
				writes[i].token, writes[i].version, writes[i-1].token, writes[i-1].version))
		}
	}
	sort.Strings(c.overlaps)
	return c
}
