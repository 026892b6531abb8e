package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/client"
)

// scanWorkload is the consistent-scan workload (scan_check_test.go): one
// writer cycling rounds over the keys, and readers that read all of them
// at once (forward and reverse scans with small pages, slowed between
// pages so that the writer moves on while they read, and BatchGets) and
// check each read with checkSnapshot. A third of the reads are followed
// by reads "as of" the timestamp the first was served at, which must
// return exactly the same entries, versions included.
type scanWorkload struct {
	// unsupported says why the workload does not run (the nodes serve no
	// read timestamps yet), or "".
	unsupported string
	// asOf: readers check reads as of their timestamps (off for the
	// planted bug's readers, whose as-of reads it would break too).
	asOf bool

	rounds   atomic.Int64 // rounds the writer completed
	reads    atomic.Int64 // reads checked
	asOfs    atomic.Int64 // as-of reads compared
	failures atomic.Int64 // reads that failed (errors, not violations)

	mu         sync.Mutex
	violations []string
	nViolation int
	nTorn      int // violations that are torn snapshots
}

// maxViolationsKept bounds the violations kept for the report.
const maxViolationsKept = 20

// violation records one; torn says it is a torn snapshot.
func (w *scanWorkload) violation(torn bool, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nViolation++
	if torn {
		w.nTorn++
	}
	if len(w.violations) < maxViolationsKept {
		w.violations = append(w.violations, fmt.Sprintf(format, args...))
	}
}

// result returns the number of violations and the first ones.
func (w *scanWorkload) result() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nViolation, append([]string(nil), w.violations...)
}

// setupScanWorkload splits the workload's keys into ten ranges (k00-k09,
// k10-k19, ...), writes round 0 to every key, and checks that the nodes
// serve reads at a timestamp; it returns the number of splits it made.
func setupScanWorkload(cl *client.Client, timeout time.Duration) (*scanWorkload, int, error) {
	w := &scanWorkload{asOf: true}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	splits := 0
	for i := 10; i < scanKeys; i += 10 {
		key := []byte(scanKey(i))
		for {
			_, _, err := cl.Split(ctx, key)
			if err == nil {
				splits++
				break
			}
			if ri, e := cl.RangeInfo(ctx, key); e == nil && string(ri.StartKey) == string(key) {
				break // an earlier attempt made it
			}
			if ctx.Err() != nil {
				return nil, splits, fmt.Errorf("splitting at %s: %w", key, err)
			}
			pause(ctx, 100*time.Millisecond)
		}
	}
	for i := range scanKeys {
		if err := putUntilDone(ctx, cl, scanKey(i), "0"); err != nil {
			return nil, splits, fmt.Errorf("writing round 0: %w", err)
		}
	}
	// Validity: the keys span at least ten ranges. Each split above
	// committed, but the range list comes from the answering node's copy
	// of meta, which trails the splits: the proposer updates meta after
	// the split commits (and the ranges' leaders repair it within
	// MetaCheckInterval if that update failed), and a follower of meta
	// applies it later still. So wait, within the timeout, for the list
	// to show the layout; only a layout that never shows is a failure.
	ranges := 0
	for {
		n, err := scanRanges(ctx, cl)
		if err == nil {
			ranges = n
			if ranges >= 10 {
				break
			}
		}
		if ctx.Err() != nil {
			if err != nil {
				return nil, splits, fmt.Errorf("listing the ranges: %w", err)
			}
			return nil, splits, fmt.Errorf("the %d keys span %d ranges, want at least 10", scanKeys, ranges)
		}
		pause(ctx, 100*time.Millisecond)
	}
	var served client.Timestamp
	if _, err := readScan(ctx, cl, false, 1000, 0, client.ServedAt(&served)); err != nil {
		return nil, splits, fmt.Errorf("first scan: %w", err)
	}
	if served.IsZero() {
		w.unsupported = "the nodes answer reads without a read_timestamp (versions are not wired into the server)"
	}
	return w, splits, nil
}

// scanRanges returns how many ranges of the list the answering node's
// copy of meta holds overlap the workload's keys.
func scanRanges(ctx context.Context, cl *client.Client) (int, error) {
	rs, err := cl.RangeList(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rs {
		d := r.Descriptor
		if string(d.GetStartKey()) <= scanKey(scanKeys-1) && (len(d.GetEndKey()) == 0 || string(d.GetEndKey()) > scanKey(0)) {
			n++
		}
	}
	return n, nil
}

// putUntilDone writes key until a write is acknowledged: the writer's
// writes are the same value each time, so an earlier attempt that applies
// late changes nothing.
func putUntilDone(ctx context.Context, cl *client.Client, key, value string) error {
	for {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		err := cl.Put(octx, []byte(key), []byte(value))
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		pause(ctx, 50*time.Millisecond)
	}
}

// writer writes rounds 1, 2, ... to the keys in key order until ctx ends.
func (w *scanWorkload) writer(ctx context.Context, sess *session) {
	for r := 1; ctx.Err() == nil; r++ {
		for i := range scanKeys {
			if putUntilDone(ctx, sess.get(), scanKey(i), strconv.Itoa(r)) != nil {
				return
			}
		}
		w.rounds.Store(int64(r))
	}
}

// readScan reads every workload key with one Scan: forward or reverse,
// pageSize entries a page, pausing pageDelay after each page is consumed
// (the client fetches the next page only then).
func readScan(ctx context.Context, cl *client.Client, reverse bool, pageSize int, pageDelay time.Duration, ro ...client.ReadOption) ([]client.KeyValue, error) {
	var out []client.KeyValue
	for kv, err := range cl.Scan(ctx, []byte(scanPrefix), []byte(scanEnd), &client.ScanOptions{Reverse: reverse, PageSize: uint32(pageSize)}, ro...) {
		if err != nil {
			return nil, err
		}
		out = append(out, kv)
		if pageDelay > 0 && len(out)%pageSize == 0 {
			time.Sleep(pageDelay)
		}
	}
	if reverse {
		slices.Reverse(out)
	}
	return out, nil
}

// readBatch reads every workload key with one BatchGet; absent keys are
// left out.
func readBatch(ctx context.Context, cl *client.Client, ro ...client.ReadOption) ([]client.KeyValue, error) {
	keys := make([][]byte, scanKeys)
	for i := range keys {
		keys[i] = []byte(scanKey(i))
	}
	res, err := cl.BatchGet(ctx, keys, ro...)
	if err != nil {
		return nil, err
	}
	var out []client.KeyValue
	for i, r := range res {
		if r.Found {
			out = append(out, client.KeyValue{Key: keys[i], Value: r.Value, Version: r.Version, CreateVersion: r.CreateVersion})
		}
	}
	return out, nil
}

// reader reads and checks until ctx ends.
func (w *scanWorkload) reader(ctx context.Context, sess *session, rng *rand.Rand) {
	for ctx.Err() == nil {
		cl := sess.get()
		var served client.Timestamp
		reverse, pageSize := rng.IntN(2) == 0, 5+rng.IntN(20)
		pageDelay := time.Duration(rng.IntN(8)) * time.Millisecond
		batch := rng.IntN(4) == 0
		desc := fmt.Sprintf("scan (reverse %v, pages of %d, %v between pages)", reverse, pageSize, pageDelay)
		if batch {
			desc = "BatchGet"
		}
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var got []client.KeyValue
		var err error
		if batch {
			got, err = readBatch(octx, cl, client.ServedAt(&served))
		} else {
			got, err = readScan(octx, cl, reverse, pageSize, pageDelay, client.ServedAt(&served))
		}
		if err == nil && w.asOf && !served.IsZero() && rng.IntN(3) == 0 {
			w.checkAsOf(octx, cl, desc, served, got, rng)
		}
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				w.failures.Add(1)
				pause(ctx, 50*time.Millisecond)
			}
			continue
		}
		w.reads.Add(1)
		if why := w.check(got, served); why != "" {
			w.violation(strings.HasPrefix(why, "torn"), "%s served at %s: %s", desc, client.FormatTimestamp(served), why)
		}
		pause(ctx, thinkTime)
	}
}

// check checks one read: a state the keys held at one moment (checked
// first, so that a torn read is reported as torn), and no version above
// the timestamp it was served at.
func (w *scanWorkload) check(got []client.KeyValue, served client.Timestamp) string {
	entries := make([]scanEntry, len(got))
	for i, kv := range got {
		entries[i] = scanEntry{key: string(kv.Key), value: string(kv.Value)}
	}
	if why := checkSnapshot(entries); why != "" {
		return why
	}
	for _, kv := range got {
		if !served.IsZero() && served.Less(kv.Version) {
			return fmt.Sprintf("%s has version %s, above the read's timestamp", kv.Key, client.FormatTimestamp(kv.Version))
		}
	}
	return ""
}

// checkAsOf reads again as of served, by Scan (the other way round, other
// pages) and by BatchGet, and compares with what the read returned.
func (w *scanWorkload) checkAsOf(ctx context.Context, cl *client.Client, desc string, served client.Timestamp, want []client.KeyValue, rng *rand.Rand) {
	again, err := readScan(ctx, cl, rng.IntN(2) == 0, 3+rng.IntN(30), 0, client.AtTimestamp(served))
	if err != nil {
		if errors.Is(err, client.ErrHistoryCompacted) || errors.Is(err, client.ErrInvalidArgument) {
			w.violation(false, "as of %s (after a %s): %v", client.FormatTimestamp(served), desc, err)
		}
		return
	}
	if why := sameEntries(want, again); why != "" {
		w.violation(false, "scan as of %s differs from the %s served at it: %s", client.FormatTimestamp(served), desc, why)
		return
	}
	batch, err := readBatch(ctx, cl, client.AtTimestamp(served))
	if err != nil {
		return
	}
	if why := sameEntries(want, batch); why != "" {
		w.violation(false, "BatchGet as of %s differs from the %s served at it: %s", client.FormatTimestamp(served), desc, why)
		return
	}
	w.asOfs.Add(1)
}

// sameEntries compares two reads' workload keys entry by entry (keys,
// values, versions). Probe keys (probeSuffix) are left out: a BatchGet
// does not ask for them, and a scan after the probe may hold them.
func sameEntries(want, got []client.KeyValue) string {
	want, got = workloadOnly(want), workloadOnly(got)
	for i := range max(len(want), len(got)) {
		switch {
		case i >= len(want):
			return fmt.Sprintf("extra entry %s=%s", got[i].Key, got[i].Value)
		case i >= len(got):
			return fmt.Sprintf("missing entry %s=%s", want[i].Key, want[i].Value)
		case string(want[i].Key) != string(got[i].Key) || string(want[i].Value) != string(got[i].Value) ||
			want[i].Version != got[i].Version || want[i].CreateVersion != got[i].CreateVersion:
			return fmt.Sprintf("entry %d: %s=%s@%s (created %s), then %s=%s@%s (created %s)", i,
				want[i].Key, want[i].Value, client.FormatTimestamp(want[i].Version), client.FormatTimestamp(want[i].CreateVersion),
				got[i].Key, got[i].Value, client.FormatTimestamp(got[i].Version), client.FormatTimestamp(got[i].CreateVersion))
		}
	}
	return ""
}

func workloadOnly(kvs []client.KeyValue) []client.KeyValue {
	var out []client.KeyValue
	for _, kv := range kvs {
		if _, ok := scanIndex(string(kv.Key)); ok {
			out = append(out, kv)
		}
	}
	return out
}

// torn returns how many violations were torn snapshots.
func (w *scanWorkload) torn() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nTorn
}
