package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// runConfig is one run: one nemesis against a fresh cluster.
type runConfig struct {
	nemesis  *nemesis
	duration time.Duration // of the fault schedule
	nodes    int
	seed     uint64
	// Workers: register workers over regKeys hot keys, set workers, and
	// the consistent-scan workload's readers (plus its one writer); and
	// txnWorkers each of the bank and list-append (txn_workload_test.go).
	regWorkers, regKeys, setWorkers, scanReaders, txnWorkers int
	// watch runs the watch workload and its checker
	// (watch_workload_test.go).
	watch bool
}

// leaseWorkers is how many lease workers a run has (lease_check_test.go),
// lockWorkers how many take turns on its mutex (lock_check_test.go),
// electWorkers how many campaign in its election, beside one observer
// (elect_check_test.go).
const (
	leaseWorkers = 2
	lockWorkers  = 2
	electWorkers = 2
)

// runResult is one row of the report.
type runResult struct {
	name          string
	ops           int
	indeterminate int
	histories     int
	violations    int
	lost          int
	scanReads     int // consistent reads checked (scan_workload_test.go)
	torn          int // torn snapshots among them (other violations: problems)
	scanSkipped   string
	txns          int     // committed transactions (bank and list-append)
	txnBad        int     // broken bank reads plus list-append anomalies
	backup        string  // the backup check's summary (backup_check_test.go)
	leases        string  // the lease check's summary (lease_check_test.go)
	locks         string  // the lock check's summary (lock_check_test.go)
	elect         string  // the election check's summary (elect_check_test.go)
	watch         string  // the watch check's summary (watch_check_test.go)
	availFault    float64 // ok fraction of the operations that overlapped a fault
	availAfter    float64 // ok fraction of the operations invoked after the first fault began
	faultTime     time.Duration
	leaderChanges int
	skipped       string
	problems      []string // why the run failed (violations, invalid run, errors)
	artifacts     string
}

// run is the state of one run, shared by the schedule, the nemeses and
// the workers.
type run struct {
	t      testing.TB
	cfg    runConfig
	c      *cluster
	net    *netFaults
	netErr string
	rng    *rand.Rand // the schedule's; used only by the schedule's goroutine
	h      *history
	adm    *session

	mu    sync.Mutex
	spans []span
	skip  map[string]string
	// ranges counts the ranges the split/merge storm has made (from 1);
	// noMerge is set once Merge answered Unimplemented.
	ranges  int
	noMerge bool
}

func (r *run) logf(format string, args ...any) {
	r.t.Logf("[%s %6.1fs] "+format, append([]any{r.cfg.nemesis.name, time.Since(r.h.start).Seconds()}, args...)...)
}

// admin returns a client for admin calls (redialled after membership
// changes).
func (r *run) admin() *client.Client { return r.adm.get() }

// unavailable says (once per run, cached) why nemesis n cannot run here.
func (r *run) unavailable(n *nemesis) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if why, ok := r.skip[n.name]; ok {
		return why
	}
	why := ""
	if n.inject == nil && n.unavailable == nil {
		why = "not implemented"
	} else if n.unavailable != nil {
		why = n.unavailable(r)
	}
	r.skip[n.name] = why
	return why
}

// scheduleRNG derives a nemesis's schedule from the run's seed, so that
// one seed replays every nemesis's choices.
func scheduleRNG(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// artifactsDir is where a failing run leaves its evidence: under
// $SHALE_ARTIFACTS if set, else a new folder in the system temp dir (the
// test's own temp dir is deleted when it ends).
func artifactsDir(name string, seed uint64) string {
	base := os.Getenv("SHALE_ARTIFACTS")
	if base == "" {
		base = os.TempDir()
	}
	return filepath.Join(base, fmt.Sprintf("shale-jepsen-%s-%d-%d", name, seed, time.Now().Unix()))
}

// runNemesis runs one nemesis for cfg.duration and checks the result.
func runNemesis(t *testing.T, cfg runConfig) runResult {
	res := runResult{name: cfg.nemesis.name}
	dir := t.TempDir()
	backupDir := filepath.Join(dir, "backups")
	c := startCluster(t, dir, cfg.nodes, cfg.nemesis.smallDisks, slices.Concat(cfg.nemesis.nodeFlags, backupFlags(backupDir))...)
	r := &run{t: t, cfg: cfg, c: c, rng: scheduleRNG(cfg.seed, cfg.nemesis.name), skip: map[string]string{}, ranges: 1}
	r.h = newHistory(time.Now())
	if why := netAvailable(); why != "" {
		r.netErr = why
	} else if nf, err := newNetFaults(); err != nil {
		r.netErr = err.Error()
	} else {
		r.net = nf
		t.Cleanup(func() {
			if err := nf.close(); err != nil {
				t.Errorf("removing the iptables chain: %v", err)
			}
		})
	}
	if why := r.unavailable(cfg.nemesis); why != "" {
		res.skipped = why
		return res
	}
	adm, err := newSession(c, t)
	if err != nil {
		t.Fatalf("dialling the cluster: %v", err)
	}
	defer adm.close()
	r.adm = adm

	// Validity: the cluster starts empty.
	if n, err := countKeys(adm.get()); err != nil {
		t.Fatalf("reading the new cluster: %v", err)
	} else if n != 0 {
		res.problems = append(res.problems, fmt.Sprintf("invalid run: the cluster did not start empty (%d keys)", n))
	}

	// The consistent-scan workload's keys, over ten ranges.
	scan, splits, err := setupScanWorkload(adm.get(), 30*time.Second)
	switch {
	case err != nil:
		res.problems = append(res.problems, "invalid run: setting up the consistent-scan workload: "+err.Error())
		scan = nil
	case scan.unsupported != "":
		res.scanSkipped = scan.unsupported
		r.logf("consistent-scan workload skipped: %s", scan.unsupported)
		scan = nil
	}
	r.mu.Lock()
	r.ranges += splits
	r.mu.Unlock()

	// The transactional workloads, the bank over ten ranges.
	var txn *txnWorkloads
	var sessions []*session
	if cfg.txnWorkers > 0 {
		var txnSessions []*session
		for range cfg.txnWorkers {
			s, err := newSession(c, t)
			if err != nil {
				t.Fatalf("dialling the cluster: %v", err)
			}
			txnSessions = append(txnSessions, s)
		}
		sessions = append(sessions, txnSessions...)
		var splits int
		txn, splits, err = setupTxnWorkloads(adm.get(), txnSessions, 30*time.Second)
		if err != nil {
			res.problems = append(res.problems, "invalid run: setting up the transactional workloads: "+err.Error())
			txn = nil
		}
		r.mu.Lock()
		r.ranges += splits
		r.mu.Unlock()
	}

	mon := startLeaderMonitor(c)
	ctx, stopWorkers := context.WithCancel(context.Background())
	reg := newRegisterWorkload(r.h, cfg.regKeys)
	set := newSetWorkload(r.h)
	leases := &leaseWorkload{}
	locks := &lockWorkload{hold: func(r *rand.Rand) time.Duration {
		return 200*time.Millisecond + time.Duration(r.Int64N(int64(800*time.Millisecond)))
	}}
	elect := &electWorkload{proclaimEvery: 100 * time.Millisecond, hold: func(r *rand.Rand) time.Duration {
		return 200*time.Millisecond + time.Duration(r.Int64N(int64(800*time.Millisecond)))
	}}
	var wg sync.WaitGroup
	if txn != nil {
		txn.run(ctx, &wg, cfg.txnWorkers, cfg.seed)
	}
	for i := range leaseWorkers {
		s, err := newSession(c, t)
		if err != nil {
			t.Fatalf("dialling the cluster: %v", err)
		}
		sessions = append(sessions, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			leases.worker(ctx, i, s, rand.New(rand.NewPCG(cfg.seed, uint64(2000+i))))
		}()
	}
	for i := range lockWorkers {
		s, err := newSession(c, t)
		if err != nil {
			t.Fatalf("dialling the cluster: %v", err)
		}
		sessions = append(sessions, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			locks.worker(ctx, i, s, rand.New(rand.NewPCG(cfg.seed, uint64(3000+i))))
		}()
	}
	for i := range electWorkers + 1 {
		s, err := newSession(c, t)
		if err != nil {
			t.Fatalf("dialling the cluster: %v", err)
		}
		sessions = append(sessions, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == electWorkers {
				elect.observer(ctx, s)
				return
			}
			elect.worker(ctx, i, s, rand.New(rand.NewPCG(cfg.seed, uint64(4000+i))))
		}()
	}
	for i := range cfg.regWorkers + cfg.setWorkers {
		s, err := newSession(c, t)
		if err != nil {
			t.Fatalf("dialling the cluster: %v", err)
		}
		sessions = append(sessions, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i < cfg.regWorkers {
				reg.worker(ctx, i, s, rand.New(rand.NewPCG(cfg.seed, uint64(i))))
			} else {
				set.worker(ctx, i, s)
			}
		}()
	}

	// The watch workload: its writer stops with the other workers, its
	// watchers only once they have caught up (below).
	var watch *watchWorkload
	wctx, stopWatchers := context.WithCancel(context.Background())
	defer stopWatchers()
	var watchWG sync.WaitGroup
	if cfg.watch {
		watch = &watchWorkload{retention: retentionOf(cfg.nemesis.nodeFlags)}
		var ws []*session
		for range 4 {
			s, err := newSession(c, t)
			if err != nil {
				t.Fatalf("dialling the cluster: %v", err)
			}
			ws = append(ws, s)
		}
		sessions = append(sessions, ws...)
		// The writer runs under the workers' context, the watchers under
		// their own.
		wg.Add(1)
		go func() {
			defer wg.Done()
			watch.writer(ctx, ws[0], rand.New(rand.NewPCG(cfg.seed, 3000)))
		}()
		watch.startWatchers(wctx, &watchWG, ws[1:], cfg.duration/4)
	}

	if scan != nil {
		for i := range 1 + cfg.scanReaders {
			s, err := newSession(c, t)
			if err != nil {
				t.Fatalf("dialling the cluster: %v", err)
			}
			sessions = append(sessions, s)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i == 0 {
					scan.writer(ctx, s)
				} else {
					scan.reader(ctx, s, rand.New(rand.NewPCG(cfg.seed, uint64(1000+i))))
				}
			}()
		}
	}

	// A backup of the whole key space a third of the way into the
	// schedule, retried until one completes (backup_check_test.go).
	bsess, err := newSession(c, t)
	if err != nil {
		t.Fatalf("dialling the cluster: %v", err)
	}
	sessions = append(sessions, bsess)
	bctx, stopBackup := context.WithCancel(context.Background())
	defer stopBackup()
	backupDone := make(chan backupTaken, 1)
	go func() {
		pause(bctx, cfg.duration/3)
		backupDone <- takeBackup(bctx, bsess, "chaos-"+cfg.nemesis.name)
	}()

	r.logf("seed %d: %d nodes, %d register workers on %d keys, %d set workers, consistent-scan readers %d",
		cfg.seed, cfg.nodes, cfg.regWorkers, cfg.regKeys, cfg.setWorkers, map[bool]int{true: cfg.scanReaders}[scan != nil])
	pause(context.Background(), time.Second)
	schedErr := r.schedule()
	healed := time.Now()

	// Validity: after healing, a write to every range succeeds within 10 s.
	if err := probeEveryRange(adm.get(), 10*time.Second); err != nil {
		res.problems = append(res.problems, "invalid run: after healing, "+err.Error())
	} else {
		r.logf("healed: a write reached every range %v after the last heal", time.Since(healed).Round(time.Millisecond))
	}
	// The backup, if none has completed yet, gets one more attempt's time
	// while the writers still run.
	var backup backupTaken
	select {
	case backup = <-backupDone:
	case <-time.After(backupAttemptTimeout):
		stopBackup()
		backup = <-backupDone
	}
	pause(context.Background(), 3*time.Second) // availability after the faults
	stopWorkers()
	wg.Wait()
	if watch != nil {
		set.mu.Lock()
		added := maps.Clone(set.added)
		set.mu.Unlock()
		watch.caughtUp(added, 30*time.Second)
		stopWatchers()
		watchWG.Wait()
		summary, problems := watch.check(added)
		res.watch = "ok"
		if len(problems) > 0 {
			res.watch = "FAILED"
			res.problems = append(res.problems, problems...)
		}
		r.logf("watch: %s", summary)
	}
	for _, s := range sessions {
		s.close()
	}
	res.leaderChanges = mon.stop()
	if schedErr != nil {
		res.problems = append(res.problems, "nemesis: "+schedErr.Error())
	}

	ops := r.h.snapshot()
	r.mu.Lock()
	spans := append([]span(nil), r.spans...)
	r.mu.Unlock()
	res.ops = len(ops)
	var regOps []op
	overlap, faultOps, faultOK, afterOps, afterOK := 0, 0, 0, 0, 0
	var inFlight, inFlightFault int64 // ns of operations in flight, and under a fault
	var firstFault int64 = -1
	if len(spans) > 0 {
		firstFault = spans[0].Start
	}
	for _, o := range ops {
		if o.outcome == unknownOutcome {
			res.indeterminate++
		}
		if o.Input.Kind != opAdd {
			regOps = append(regOps, o)
		}
		inFlight += o.Return - o.Call
		inFlightFault += overlapTime(o, spans)
		if overlapsAny(o, spans) {
			overlap++
			faultOps++
			if o.outcome == okOutcome {
				faultOK++
			}
		}
		if firstFault >= 0 && o.Call >= firstFault {
			afterOps++
			if o.outcome == okOutcome {
				afterOK++
			}
		}
	}
	res.availFault = ratio(faultOK, faultOps)
	res.availAfter = ratio(afterOK, afterOps)
	for _, s := range spans {
		res.faultTime += time.Duration(s.End - s.Start)
	}

	// Validity: faults overlapped at least 20% of the operations (of
	// their time in flight, for a nemesis that slows operations), and the
	// leadership moved at least once.
	opShare, timeShare := ratio(overlap, len(ops)), 0.0
	if inFlight > 0 {
		timeShare = float64(inFlightFault) / float64(inFlight)
	}
	r.logf("faults overlapped %.0f%% of the operations and %.0f%% of their time in flight", 100*opShare, 100*timeShare)
	if cfg.nemesis.slowsOps {
		if timeShare < 0.2 {
			res.problems = append(res.problems, fmt.Sprintf("invalid run: faults overlapped only %.0f%% of the operations' time in flight (need 20%%)", 100*timeShare))
		}
	} else if opShare < 0.2 {
		res.problems = append(res.problems, fmt.Sprintf("invalid run: only %.0f%% of operations overlapped a fault (need 20%%)", 100*opShare))
	}
	if res.leaderChanges < 1 {
		res.problems = append(res.problems, "invalid run: no leader change was observed")
	}
	if cfg.nemesis.valid != nil {
		if why := cfg.nemesis.valid(r); why != "" {
			res.problems = append(res.problems, "invalid run: "+why)
		}
	}

	art := artifactsDir(cfg.nemesis.name, cfg.seed)
	rc, err := checkRegister(regOps, art)
	if err != nil {
		res.problems = append(res.problems, err.Error())
	}
	res.histories = rc.histories
	res.violations = len(rc.violations)
	if len(rc.violations) > 0 {
		res.problems = append(res.problems, fmt.Sprintf("not linearizable: keys %v", rc.violations))
	}
	if len(rc.timeouts) > 0 {
		res.problems = append(res.problems, fmt.Sprintf("check timed out (counts as a failure): keys %v", rc.timeouts))
	}
	if scan != nil {
		n, vs := scan.result()
		res.scanReads, res.torn = int(scan.reads.Load()), scan.torn()
		r.logf("consistent scans: writer completed %d rounds; %d reads checked (%d failed), %d as-of rereads identical, %d violations",
			scan.rounds.Load(), res.scanReads, scan.failures.Load(), scan.asOfs.Load(), n)
		if n > 0 {
			res.problems = append(res.problems, fmt.Sprintf("%d inconsistent reads, e.g.:\n    %s", n, strings.Join(first(vs, 5), "\n    ")))
		}
		if scan.rounds.Load() == 0 || res.scanReads == 0 {
			res.problems = append(res.problems, fmt.Sprintf("invalid run: the consistent-scan writer completed %d rounds and %d reads were checked (need 1 of each)",
				scan.rounds.Load(), res.scanReads))
		}
	}
	if txn != nil {
		tc := txn.check()
		res.txns, res.txnBad = tc.committed, tc.badReads+tc.anomalies
		res.problems = append(res.problems, tc.problems...)
		r.logf("transactions: %s", tc.summary)
	}
	read, err := readAll(adm.get(), 30*time.Second)
	if err != nil {
		res.problems = append(res.problems, err.Error())
	} else {
		set.mu.Lock()
		sc := checkSet(set.added, read)
		set.mu.Unlock()
		res.lost = len(sc.lost)
		if len(sc.lost) > 0 {
			res.problems = append(res.problems, fmt.Sprintf("%d of %d acknowledged adds lost, e.g. %v", len(sc.lost), sc.acked, first(sc.lost, 5)))
		}
		if len(sc.unexpected) > 0 {
			res.problems = append(res.problems, fmt.Sprintf("%d unexpected elements, e.g. %v", len(sc.unexpected), first(sc.unexpected, 5)))
		}
		r.logf("set: %d acknowledged adds all present, %d indeterminate adds present", sc.acked-len(sc.lost), sc.recovered)
	}
	locks.mu.Lock()
	lk := checkLocks(locks.holds)
	locks.mu.Unlock()
	res.locks = "ok"
	if p := lk.problems(); len(p) > 0 {
		res.problems = append(res.problems, p...)
		res.locks = "FAILED"
	} else if lk.holds < 2 || lk.writes == 0 {
		res.problems = append(res.problems, fmt.Sprintf("invalid run: the lock workers held the lock %d times and made %d fenced writes (need 2 turns and a write)", lk.holds, lk.writes))
		res.locks = "-"
	} else {
		r.logf("locks: %d turns, %d fenced writes in token order, %d fenced out; no two live holders overlapped", lk.holds, lk.writes, lk.fenced)
	}
	elect.mu.Lock()
	ec := checkElections(elect.terms, elect.seen)
	elect.mu.Unlock()
	res.elect = "ok"
	if p := ec.problems(); len(p) > 0 {
		res.problems = append(res.problems, p...)
		res.elect = "FAILED"
	} else if ec.terms < 2 || ec.seen == 0 {
		res.problems = append(res.problems, fmt.Sprintf("invalid run: the election had %d terms and the observer saw %d leaders (need 2 terms and a leader seen)", ec.terms, ec.seen))
		res.elect = "-"
	} else {
		r.logf("election: %d terms, %d proclaims, %d leaders observed in election order; no two live leaders overlapped", ec.terms, ec.proclaims, ec.seen)
	}
	res.leases = "-"
	if lc, err := finishLeases(leases, adm.get()); err != nil {
		res.problems = append(res.problems, "lease check: "+err.Error())
	} else if p := lc.problems(); len(p) > 0 {
		res.problems = append(res.problems, p...)
		res.leases = "FAILED"
	} else if lc.kept == 0 {
		res.problems = append(res.problems, fmt.Sprintf("invalid run: no lease session had an acknowledged keep-alive (%d sessions)", lc.sessions))
	} else {
		res.leases = "ok"
		r.logf("leases: %d sessions (%d kept alive, %d revoked): no key went early, none outlived its lease by more than %v",
			lc.sessions, lc.kept, lc.revoked, leaseBound)
	}
	res.backup = "-"
	if backup.manifest == nil {
		res.problems = append(res.problems, fmt.Sprintf("invalid run: no backup completed during the run (%d attempts, the last: %v)",
			backup.attempts, backup.lastErr))
	} else {
		// The source cluster's work is done; its logs stay on disk.
		for _, nd := range c.nodes(true) {
			nd.kill()
		}
		set.mu.Lock()
		added := maps.Clone(set.added)
		set.mu.Unlock()
		bc, err := restoreAndCheck(t, filepath.Join(dir, "restore"), backupDir, backup, added)
		switch {
		case err != nil:
			res.problems = append(res.problems, "backup check: "+err.Error())
		case len(bc.problems()) > 0:
			res.problems = append(res.problems, bc.problems()...)
			res.backup = "FAILED"
		default:
			res.backup = "ok"
			r.logf("backup %s at %v (attempt %d, %d entries) restored into a fresh cluster: the %d adds acknowledged at or below its timestamp all there, none of the %d later, %d indeterminate present",
				backup.dir, backup.manifest.ReadTimestamp, backup.attempts, backup.manifest.Entries, bc.expected, bc.later, bc.recovered)
		}
	}
	if len(res.problems) > 0 {
		res.artifacts = art
		if err := saveRun(art, ops, spans, c); err != nil {
			t.Errorf("saving the artifacts: %v", err)
		}
	}
	return res
}

// schedule runs the nemesis in cycles (quiet gap, fault, heal) until the
// configured duration has passed, recording each fault's span.
func (r *run) schedule() error {
	n := r.cfg.nemesis
	end := time.Now().Add(r.cfg.duration)
	for cycle := 1; ; cycle++ {
		gap := time.Duration(500+r.rng.IntN(1500)) * time.Millisecond
		if time.Until(end) < gap+n.holdMin {
			return nil
		}
		pause(context.Background(), gap)
		hold := n.holdMin + time.Duration(r.rng.Int64N(int64(n.holdMax-n.holdMin)+1))
		hold = min(hold, time.Until(end))
		start := r.h.now()
		f, desc, err := n.inject(r, r.rng)
		if err != nil {
			if f != nil {
				err = fmt.Errorf("%w (healing: %v)", err, f.heal(r))
			}
			return fmt.Errorf("cycle %d: injecting: %w", cycle, err)
		}
		r.logf("cycle %d: %s for %v", cycle, desc, hold.Round(time.Millisecond))
		pause(context.Background(), hold)
		if err := f.heal(r); err != nil {
			return fmt.Errorf("cycle %d: healing %s: %w", cycle, desc, err)
		}
		r.mu.Lock()
		r.spans = append(r.spans, span{Name: desc, Start: start, End: r.h.now()})
		r.mu.Unlock()
	}
}

func overlapsAny(o op, spans []span) bool {
	for _, s := range spans {
		if o.Call <= s.End && o.Return >= s.Start {
			return true
		}
	}
	return false
}

// overlapTime is how long o was in flight while a fault was active (the
// spans do not overlap each other).
func overlapTime(o op, spans []span) int64 {
	var t int64
	for _, s := range spans {
		if lo, hi := max(o.Call, s.Start), min(o.Return, s.End); hi > lo {
			t += hi - lo
		}
	}
	return t
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// countKeys counts every user key in the cluster.
func countKeys(cl *client.Client) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := 0
	for _, err := range cl.Scan(ctx, nil, nil, &client.ScanOptions{KeysOnly: true}) {
		if err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// probeSuffix makes the probe key of a range: its start key followed by
// this, which sorts right after the start key (so inside the range) and
// is never a workload key. The set's final read skips such keys.
const probeSuffix = "\x00probe"

// probeEveryRange writes one key inside every range, all within timeout.
func probeEveryRange(cl *client.Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var rs []rangeSpan
	for {
		resp, err := cl.Ranges(ctx)
		if err == nil {
			for _, r := range resp.GetRanges() {
				d := r.GetRangeDescriptor()
				rs = append(rs, rangeSpan{id: d.GetRangeId(), start: d.GetStartKey()})
			}
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("listing the ranges: %w", err)
		}
		pause(ctx, 100*time.Millisecond)
	}
	// Every range is probed at once: the bound is on each range's return
	// to service after the heal, not on the sum of them (a cluster of 25
	// ranges on a loaded machine took 2-8 s for the sum when probed one
	// after another, and once ran out of the 10 s).
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := append(append([]byte{}, r.start...), probeSuffix...)
			for {
				err := cl.Put(ctx, key, []byte("probe"))
				if err == nil {
					return
				}
				if ctx.Err() != nil {
					errs[i] = fmt.Errorf("no write to range %d succeeded within %v: %w", r.id, timeout, err)
					return
				}
				pause(ctx, 50*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

type rangeSpan struct {
	id    uint64
	start []byte
}

// saveRun writes the whole history, the fault spans and the nodes' logs.
func saveRun(dir string, ops []op, spans []span, c *cluster) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(struct {
		Ops    []op   `json:"ops"`
		Faults []span `json:"faults"`
	}{ops, spans})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "history.json"), b, 0o644); err != nil {
		return err
	}
	for _, nd := range c.nodes(true) {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("node%d.log", nd.id)), []byte(nd.log()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// leaderMonitor polls who leads each range and counts the changes.
type leaderMonitor struct {
	cancel  context.CancelFunc
	done    chan struct{}
	changes int
}

func startLeaderMonitor(c *cluster) *leaderMonitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &leaderMonitor{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		last := map[uint64]leaderInfo{}
		for ctx.Err() == nil {
			for id, li := range c.leaders(400 * time.Millisecond) {
				if old, ok := last[id]; ok && (li.term > old.term || (li.term == old.term && li.node != old.node)) {
					m.changes++
				}
				if old, ok := last[id]; !ok || li.term >= old.term {
					last[id] = li
				}
			}
			pause(ctx, 200*time.Millisecond)
		}
	}()
	return m
}

// stop ends the monitor and returns the number of leader changes seen.
func (m *leaderMonitor) stop() int {
	m.cancel()
	<-m.done
	return m.changes
}

// report formats the per-nemesis table.
func report(results []runResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-18s %7s %7s %9s %10s %5s %6s %5s %6s %6s %7s %6s %6s %6s %6s %8s %8s %7s %7s  %s\n",
		"nemesis", "ops", "indet", "histories", "violations", "lost", "scans", "torn", "backup", "txns", "txn-bad", "leases", "locks", "elect", "watch", "avail-f", "avail-a", "faults", "leader", "notes")
	for _, r := range results {
		if r.skipped != "" {
			fmt.Fprintf(&b, "%-18s %7s %7s %9s %10s %5s %6s %5s %6s %6s %7s %6s %6s %6s %6s %8s %8s %7s %7s  skipped: %s\n", r.name, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", r.skipped)
			continue
		}
		note := "ok"
		if len(r.problems) > 0 {
			note = "FAILED: " + strings.Join(r.problems, "; ")
		}
		scans, torn := strconv.Itoa(r.scanReads), strconv.Itoa(r.torn)
		if r.scanSkipped != "" {
			scans, torn = "-", "-"
			note += " (consistent scans skipped: " + r.scanSkipped + ")"
		}
		watch := r.watch
		if watch == "" {
			watch = "-"
		}
		elect := r.elect
		if elect == "" {
			elect = "-"
		}
		fmt.Fprintf(&b, "%-18s %7d %7d %9d %10d %5d %6s %5s %6s %6d %7d %6s %6s %6s %6s %7.1f%% %7.1f%% %6.0fs %7d  %s\n",
			r.name, r.ops, r.indeterminate, r.histories, r.violations, r.lost, scans, torn, r.backup, r.txns, r.txnBad, r.leases, r.locks, elect, watch,
			100*r.availFault, 100*r.availAfter, r.faultTime.Seconds(), r.leaderChanges, note)
	}
	return b.String()
}
