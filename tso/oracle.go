package tso

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shaledb/shale/hlc"
)

// Meta is what an Oracle needs of the meta range's replica on its node.
type Meta interface {
	// Lease returns the meta range's Raft term if this node holds its
	// leader lease now, renewing the lease (a quorum round) if it has
	// lapsed while this node still leads; otherwise an error saying who
	// leads, if known.
	Lease(ctx context.Context) (term uint64, err error)
	// Check returns nil if this node still holds the lease of term, with
	// no renewal, or the error Lease would give.
	Check(term uint64) error
	// RaiseWindow commits max(W, w) as the persisted window W through the
	// meta range's Raft log and returns W as it was before. It proposes
	// only on the leader (never forwards), so a raise that applies was
	// committed in a term this node led.
	RaiseWindow(ctx context.Context, w int64) (prev int64, err error)
}

// Config configures an Oracle.
type Config struct {
	// Clock issues the timestamps: the node's clock, so that it is above
	// every timestamp the node has seen.
	Clock *hlc.Clock
	// Meta is the node's meta replica.
	Meta Meta
	// Ahead is how far above its clock the oracle persists its window.
	// Default (0): half the clock's maximum offset. See docs/versions.md
	// for why it is short.
	Ahead time.Duration
	// Healthy returns nil when the node's clock may serve, or an error
	// wrapping hlc.ErrClockOffset (the offset monitor's verdict). Nil:
	// always healthy.
	Healthy func() error
	// Refused is called with every *hlc.OffsetError the oracle's clock
	// gives (the node counts and reports them). May be nil.
	Refused func(*hlc.OffsetError)
}

// MaxCount is the most timestamps one call may ask for.
const MaxCount = 1 << 16

// Oracle issues timestamps on the meta range's leaseholder. Safe for
// concurrent use.
type Oracle struct {
	cfg   Config
	ahead time.Duration
	// bg is the context of background window raises (Close cancels it).
	bg       context.Context
	bgCancel context.CancelFunc

	// raiseMu serializes activations and window raises.
	raiseMu sync.Mutex

	mu sync.Mutex
	// term is the meta term this oracle was activated in (0: never):
	// its clock is above the window found at activation.
	term uint64
	// window is the highest persisted window this oracle knows; it
	// issues nothing with a wall time above it.
	window int64
	// raising: a background raise is in flight.
	raising bool
}

// NewOracle returns an oracle over cfg.
func NewOracle(cfg Config) *Oracle {
	if cfg.Clock == nil || cfg.Meta == nil {
		panic("tso.NewOracle: Clock and Meta are required")
	}
	ahead := cfg.Ahead
	if ahead <= 0 {
		ahead = cfg.Clock.MaxOffset() / 2
	}
	o := &Oracle{cfg: cfg, ahead: ahead}
	o.bg, o.bgCancel = context.WithCancel(context.Background())
	return o
}

// Close stops background raises.
func (o *Oracle) Close() { o.bgCancel() }

// Timestamps issues n consecutive timestamps (first, its Next, ... up to
// last; 1 <= n <= MaxCount), each above every timestamp this oracle or
// any earlier one issued or observed before the call. It fails, issuing
// nothing, if this node does not hold meta's lease (Meta's error), if its
// clock is unhealthy or too far behind the persisted window (an error
// wrapping hlc.ErrClockOffset), or if the window cannot be raised.
func (o *Oracle) Timestamps(ctx context.Context, n int) (first, last hlc.Timestamp, err error) {
	if n < 1 || n > MaxCount {
		return first, last, fmt.Errorf("tso: %d timestamps asked for; 1 to %d allowed", n, MaxCount)
	}
	for {
		term, err := o.ready(ctx)
		if err != nil {
			return first, last, err
		}
		o.mu.Lock()
		if o.term != term {
			o.mu.Unlock()
			continue // lost and regained meta meanwhile: activate again
		}
		first, last = o.cfg.Clock.NowN(n)
		window := o.window
		bgRaise := last.WallTime <= window && window-last.WallTime < int64(o.ahead/2) && !o.raising
		if bgRaise {
			o.raising = true
		}
		o.mu.Unlock()
		if ahead := time.Duration(last.WallTime - o.cfg.Clock.PhysicalNow()); ahead > o.cfg.Clock.MaxOffset() {
			// The clock ran ahead of the physical clock (it took a
			// reading from a clock that was ahead, or its own physical
			// clock stepped back): every node would refuse timestamps
			// this far ahead. Hand out none.
			return hlc.Timestamp{}, hlc.Timestamp{}, fmt.Errorf("%w: the oracle's clock is %v ahead of its physical clock; not issuing", hlc.ErrClockOffset, ahead)
		}
		if last.WallTime > window {
			// The range runs past the window (never handed out): raise
			// it first, then issue again.
			if err := o.raise(ctx, last.WallTime); err != nil {
				return hlc.Timestamp{}, hlc.Timestamp{}, err
			}
			continue
		}
		if bgRaise {
			go o.backgroundRaise(last.WallTime)
		}
		// Issued within the lease only if the lease still holds now: it
		// held before, and a lease never extends across a change of term.
		if err := o.cfg.Meta.Check(term); err != nil {
			return hlc.Timestamp{}, hlc.Timestamp{}, err
		}
		return first, last, nil
	}
}

// Observe moves the oracle past ts: every timestamp issued after it
// returns, by this oracle or a later one, is above ts. It fails (and
// moves nothing) as Timestamps does, or with an *hlc.OffsetError when ts
// is beyond the maximum offset ahead of the oracle's clock.
func (o *Oracle) Observe(ctx context.Context, ts hlc.Timestamp) error {
	if _, err := o.ready(ctx); err != nil {
		return err
	}
	if err := o.cfg.Clock.Update(ts); err != nil {
		o.refused(err)
		return err
	}
	o.mu.Lock()
	window := o.window
	o.mu.Unlock()
	if ts.WallTime > window {
		// A later oracle starts above the persisted window: it must
		// cover ts before the caller is told it is observed.
		return o.raise(ctx, ts.WallTime)
	}
	return nil
}

// ready checks the clock's health and the lease, and activates the
// oracle in the lease's term if it is not yet. It returns the term.
func (o *Oracle) ready(ctx context.Context) (uint64, error) {
	if o.cfg.Healthy != nil {
		if err := o.cfg.Healthy(); err != nil {
			return 0, err
		}
	}
	term, err := o.cfg.Meta.Lease(ctx)
	if err != nil {
		return 0, err
	}
	o.mu.Lock()
	active := o.term == term
	o.mu.Unlock()
	if active {
		return term, nil
	}
	return term, o.activate(ctx, term)
}

// activate makes this node the oracle of meta term term: it persists a
// window above its clock, which also reads the window every earlier
// oracle persisted (all committed before this term's entries), and moves
// its clock past that window. A clock that window is more than the
// maximum offset ahead of waits, for at most Ahead, for its physical
// clock to catch up; one further behind refuses.
func (o *Oracle) activate(ctx context.Context, term uint64) error {
	o.raiseMu.Lock()
	defer o.raiseMu.Unlock()
	o.mu.Lock()
	done := o.term == term
	o.mu.Unlock()
	if done {
		return nil
	}
	w := o.cfg.Clock.PhysicalNow() + int64(o.ahead)
	prev, err := o.cfg.Meta.RaiseWindow(ctx, w)
	if err != nil {
		return fmt.Errorf("tso: persisting the window on taking over: %w", err)
	}
	if t, err := o.cfg.Meta.Lease(ctx); err != nil {
		return err
	} else if t != term {
		return fmt.Errorf("tso: meta's term moved from %d to %d while taking over", term, t)
	}
	if prev > 0 {
		if err := o.catchUp(ctx, prev); err != nil {
			return err
		}
	}
	o.mu.Lock()
	o.term = term
	o.window = max(o.window, prev, w)
	o.mu.Unlock()
	return nil
}

// catchUp moves the clock past the window prev an earlier oracle
// persisted.
func (o *Oracle) catchUp(ctx context.Context, prev int64) error {
	remote := hlc.Timestamp{WallTime: prev}
	for {
		err := o.cfg.Clock.Update(remote)
		var oe *hlc.OffsetError
		if !errors.As(err, &oe) {
			return err
		}
		behind := time.Duration(prev-oe.Physical) - oe.MaxOffset
		if behind > o.ahead {
			o.refused(err)
			return fmt.Errorf("tso: this node's clock is too far behind the persisted window to serve as the oracle: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(behind):
		}
	}
}

// raise persists a window above atLeast (and above the clock), unless a
// window that high is known already.
func (o *Oracle) raise(ctx context.Context, atLeast int64) error {
	o.raiseMu.Lock()
	defer o.raiseMu.Unlock()
	o.mu.Lock()
	covered := o.window >= atLeast+int64(o.ahead/2)
	o.mu.Unlock()
	if covered {
		return nil
	}
	w := max(o.cfg.Clock.PhysicalNow(), atLeast) + int64(o.ahead)
	prev, err := o.cfg.Meta.RaiseWindow(ctx, w)
	if err != nil {
		return fmt.Errorf("tso: raising the persisted window: %w", err)
	}
	o.mu.Lock()
	o.window = max(o.window, prev, w)
	o.mu.Unlock()
	return nil
}

// backgroundRaise raises the window ahead of need, so that issuing
// rarely waits for a raise.
func (o *Oracle) backgroundRaise(atLeast int64) {
	defer func() {
		o.mu.Lock()
		o.raising = false
		o.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(o.bg, 10*time.Second)
	defer cancel()
	_ = o.raise(ctx, atLeast) // a failure leaves it to the next issue
}

func (o *Oracle) refused(err error) {
	var oe *hlc.OffsetError
	if o.cfg.Refused != nil && errors.As(err, &oe) {
		o.cfg.Refused(oe)
	}
}

// Window returns the highest persisted window this oracle knows and the
// term it serves in (0 before its first activation).
func (o *Oracle) Window() (window int64, term uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.window, o.term
}
