package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds from 1µs to maxLatency with three
// significant digits.
const maxLatencyUs = int64(5 * time.Minute / time.Microsecond)

// recorder is one worker's results; only its worker writes it until the
// run ends.
type recorder struct {
	hist     [numOpKinds]*hdrhistogram.Histogram
	items    [numOpKinds]int64
	found    [numOpKinds]int64
	errs     [numOpKinds]int64
	firstErr error
}

// counters are the live totals the progress line reads every second.
type counters struct {
	ops  [numOpKinds]atomic.Int64
	errs atomic.Int64
}

// Run runs cfg's workload against target and returns its report. It
// opens cfg.Conns connections, loads data if cfg.Load is set or the
// workload needs it, and runs the timed phase. Cancelling ctx ends the
// timed phase early; the report then covers the time that ran.
func Run(ctx context.Context, target Target, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	drivers := make([]Driver, 0, cfg.Conns)
	defer func() {
		for _, d := range drivers {
			d.Close()
		}
	}()
	for i := range cfg.Conns {
		octx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		d, err := Open(octx, target, i)
		cancel()
		if err != nil {
			return nil, err
		}
		drivers = append(drivers, d)
	}

	var meter *usageMeter
	if cfg.Watch != nil {
		var err error
		if meter, err = newUsageMeter(*cfg.Watch); err != nil {
			return nil, err
		}
	}
	rep := newReport(target, cfg)
	loadStart := time.Now()
	switch {
	case cfg.Workload == "dirwalk":
		if err := loadDirs(ctx, &cfg, drivers); err != nil {
			return nil, fmt.Errorf("loading the directory tree: %w", err)
		}
	case cfg.Workload == "leases":
		var err error
		if cfg.leases, err = grantLeases(ctx, &cfg, drivers); err != nil {
			return nil, fmt.Errorf("granting %d leases: %w", cfg.Keys, err)
		}
	case cfg.Load:
		if err := loadKeys(ctx, &cfg, drivers); err != nil {
			return nil, fmt.Errorf("loading %d keys: %w", cfg.Keys, err)
		}
	}
	if cfg.Workload == "dirwalk" || cfg.Workload == "leases" || cfg.Load {
		rep.LoadSeconds = time.Since(loadStart).Seconds()
		progressf(cfg.Progress, "bench: loaded in %.1fs\n", rep.LoadSeconds)
	}

	var seq atomic.Int64
	steps := make([]step, cfg.Clients)
	waits := make([]func(context.Context), cfg.Clients)
	for i := range steps {
		wk := newWorker(i, &cfg, drivers[i%len(drivers)], cfg.Seed, &seq)
		s, err := wk.stepFor()
		if err != nil {
			return nil, err
		}
		steps[i], waits[i] = s, wk.wait
	}

	var before usageSample
	if meter != nil {
		// Sampled after the load phase, so that only the timed phase
		// counts.
		var err error
		if before, err = meter.sample(); err != nil {
			return nil, err
		}
	}

	var live counters
	var stop atomic.Bool
	recs := make([]*recorder, cfg.Clients)
	var wg sync.WaitGroup
	start := time.Now()
	for i, s := range steps {
		rec := &recorder{}
		recs[i] = rec
		wg.Add(1)
		go func() {
			defer wg.Done()
			runWorker(ctx, &cfg, s, waits[i], rec, &live, &stop)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	progress(ctx, &cfg, start, &live, &stop, done)
	elapsed := time.Since(start)
	rep.fill(recs, elapsed)
	if meter != nil {
		after, err := meter.sample()
		if err != nil {
			return nil, err
		}
		rep.Server = meter.usage(before, after)
	}
	return rep, nil
}

// runWorker issues requests one after another until stop is set or ctx
// ends.
func runWorker(ctx context.Context, cfg *Config, s step, wait func(context.Context), rec *recorder, live *counters, stop *atomic.Bool) {
	for !stop.Load() && ctx.Err() == nil {
		if wait != nil {
			wait(ctx)
			if stop.Load() || ctx.Err() != nil {
				return
			}
		}
		octx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		t0 := time.Now()
		kind, items, found, err := s(octx)
		lat := time.Since(t0)
		cancel()
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, context.Canceled) {
				return // interrupted, not failed
			}
			rec.errs[kind]++
			live.errs.Add(1)
			if rec.firstErr == nil {
				rec.firstErr = fmt.Errorf("%s: %w", kind, err)
			}
			continue
		}
		h := rec.hist[kind]
		if h == nil {
			h = hdrhistogram.New(1, maxLatencyUs, 3)
			rec.hist[kind] = h
		}
		// RecordValue fails only above maxLatencyUs, which OpTimeout
		// caps below; clamp anyway rather than lose the sample.
		_ = h.RecordValue(min(max(lat.Microseconds(), 1), maxLatencyUs))
		rec.items[kind] += int64(items)
		rec.found[kind] += int64(found)
		live.ops[kind].Add(1)
	}
}

// progress writes one line per second until the duration has passed (or
// ctx ends), then sets stop and waits for the workers to finish their last
// request.
func progress(ctx context.Context, cfg *Config, start time.Time, live *counters, stop *atomic.Bool, done <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := time.NewTimer(cfg.Duration)
	defer end.Stop()
	var last [numOpKinds]int64
	lastAt := start
	for {
		select {
		case <-end.C:
			stop.Store(true)
			<-done
			return
		case <-ctx.Done():
			stop.Store(true)
			<-done
			return
		case <-done:
			return
		case now := <-tick.C:
			if cfg.Progress == nil {
				continue
			}
			var b strings.Builder
			fmt.Fprintf(&b, "bench: %3.0fs", now.Sub(start).Seconds())
			secs := now.Sub(lastAt).Seconds()
			total := int64(0)
			for k := range numOpKinds {
				n := live.ops[k].Load()
				total += n
				if n > 0 {
					fmt.Fprintf(&b, "  %s %.0f/s", k, float64(n-last[k])/secs)
				}
				last[k] = n
			}
			fmt.Fprintf(&b, "  total %d  errors %d\n", total, live.errs.Load())
			lastAt = now
			progressf(cfg.Progress, "%s", b.String())
		}
	}
}

func progressf(w interface{ Write([]byte) (int, error) }, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}
