package jepsen

import (
	"fmt"
	"strconv"
	"strings"
)

// The consistent-scan check (issue 19). One writer writes round r to the
// keys cs/k00 .. cs/k99 in key order, each write acknowledged before the
// next (scan_workload_test.go), so at every moment the keys hold
//
//	r, r, ..., r, r-1, ..., r-1
//
// reading from k00 to k99: values that fall by at most one step. (Round 0
// is written the same way, so a key not written yet counts as round -1: a
// read at a timestamp from before round 0 was complete sees a prefix of
// the keys.) A read
// of all of them at one point in time must see exactly such a state. The
// keys are spread over at least ten ranges, so a scan or BatchGet that
// reads ranges (or pages) at different moments while the writer moves on
// sees something else: a value that rises, or a fall of more than one
// step. That is a torn snapshot.

// scanKeys is the number of keys the writer cycles through.
const scanKeys = 100

// scanPrefix holds the scan workload's keys; scanEnd bounds them.
const (
	scanPrefix = "cs/"
	scanEnd    = "cs0"
)

// scanKey is the i-th key of the workload.
func scanKey(i int) string { return fmt.Sprintf("%sk%02d", scanPrefix, i) }

// scanIndex parses a workload key, or says it is not one.
func scanIndex(key string) (int, bool) {
	s, ok := strings.CutPrefix(key, scanPrefix+"k")
	if !ok || len(s) != 2 {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 0 && i < scanKeys
}

// scanEntry is one key as a read saw it.
type scanEntry struct {
	key, value string
}

// checkSnapshot checks what one read saw of the workload's keys (in any
// order; keys with probeSuffix, which the validity probe writes, are
// ignored) and returns "" if it is a state the keys held at some moment,
// else why not.
func checkSnapshot(entries []scanEntry) string {
	vals := make([]int, scanKeys)
	seen := make([]bool, scanKeys)
	for _, e := range entries {
		if strings.HasSuffix(e.key, probeSuffix) {
			continue
		}
		i, ok := scanIndex(e.key)
		if !ok {
			return fmt.Sprintf("unexpected key %q", e.key)
		}
		if seen[i] {
			return fmt.Sprintf("key %s seen twice", e.key)
		}
		v, err := strconv.Atoi(e.value)
		if err != nil {
			return fmt.Sprintf("key %s holds %q, not a round number", e.key, e.value)
		}
		vals[i], seen[i] = v, true
	}
	for i := range scanKeys {
		if !seen[i] {
			vals[i] = -1 // not written yet
		}
	}
	for i := 1; i < scanKeys; i++ {
		if vals[i] > vals[i-1] {
			return fmt.Sprintf("torn: %s=%d rises above %s=%d (%s)", scanKey(i), vals[i], scanKey(i-1), vals[i-1], summarize(vals))
		}
	}
	if vals[0]-vals[scanKeys-1] > 1 {
		return fmt.Sprintf("torn: falls %d steps from %s=%d to %s=%d (%s)", vals[0]-vals[scanKeys-1],
			scanKey(0), vals[0], scanKey(scanKeys-1), vals[scanKeys-1], summarize(vals))
	}
	return ""
}

// summarize writes vals as runs: "k00-k41=7 k42-k99=6".
func summarize(vals []int) string {
	var b strings.Builder
	start := 0
	for i := 1; i <= len(vals); i++ {
		if i == len(vals) || vals[i] != vals[start] {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "k%02d-k%02d=%d", start, i-1, vals[start])
			start = i
		}
	}
	return b.String()
}
