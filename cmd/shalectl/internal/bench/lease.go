package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The leases workload: Keys live leases, each renewed every third of
// LeaseTTL, so that the timed phase measures what keeping many leases
// alive costs the servers (--server-pids) at a fixed rate of
// Keys*3/LeaseTTL keep-alives per second, like an etcd cluster serving as
// many sessions. The leases are granted before the timed phase (not
// measured) and each client renews its share, one keep-alive at a time,
// waiting for each lease's turn (the wait is not part of the latency).

// LeaseTTL is the TTL of the leases workload's leases.
const LeaseTTL = 10 * time.Second

// leaseDriver is what the leases workload needs of a Driver.
type leaseDriver interface {
	// Grant creates a lease of ttl and returns its ID.
	Grant(ctx context.Context, ttl time.Duration) (uint64, error)
	// KeepAliveOnce renews lease id.
	KeepAliveOnce(ctx context.Context, id uint64) error
}

// leaseState is the granted leases, shared by the workers.
type leaseState struct {
	ids []uint64
}

// grantLeases grants cfg.Keys leases, cfg.Clients at a time.
func grantLeases(ctx context.Context, cfg *Config, drivers []Driver) (*leaseState, error) {
	st := &leaseState{ids: make([]uint64, cfg.Keys)}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Clients)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for c := range cfg.Clients {
		d, ok := drivers[c%len(drivers)].(leaseDriver)
		if !ok {
			return nil, fmt.Errorf("the target has no leases")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= cfg.Keys || ctx.Err() != nil {
					return
				}
				octx, ocancel := context.WithTimeout(ctx, cfg.OpTimeout)
				id, err := d.Grant(octx, LeaseTTL)
				ocancel()
				if err != nil {
					errs <- fmt.Errorf("granting lease %d: %w", i, err)
					cancel()
					return
				}
				st.ids[i] = id
			}
		}()
	}
	wg.Wait()
	close(errs)
	return st, <-errs
}

// leaseSteps returns worker w's step and its pacing wait: it renews the
// leases i with i % Clients == w.id in turn, each every LeaseTTL/3.
func (w *worker) leaseSteps() (step, func(context.Context), error) {
	d, ok := w.d.(leaseDriver)
	if !ok || w.cfg.leases == nil {
		return nil, nil, fmt.Errorf("the leases workload needs its leases granted first")
	}
	var own []uint64
	for i := int64(w.id); i < int64(len(w.cfg.leases.ids)); i += int64(w.cfg.Clients) {
		own = append(own, w.cfg.leases.ids[i])
	}
	if len(own) == 0 {
		return func(ctx context.Context) (opKind, int, int, error) {
			<-ctx.Done()
			return opKeepAlive, 0, 0, ctx.Err()
		}, nil, nil
	}
	every := LeaseTTL / 3 / time.Duration(len(own))
	next := time.Now().Add(time.Duration(w.r.Int64N(int64(every) + 1)))
	n := 0
	wait := func(ctx context.Context) {
		t := time.NewTimer(time.Until(next))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		next = next.Add(every)
	}
	return func(ctx context.Context) (opKind, int, int, error) {
		id := own[n%len(own)]
		n++
		return opKeepAlive, 1, 1, d.KeepAliveOnce(ctx, id)
	}, wait, nil
}
