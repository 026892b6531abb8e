package jepsen

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The gc-split-merge nemesis (docs/testing.md): every node keeps history
// for 2 s only and collects it every 200 ms (gcFlags), so the GC queue
// raises thresholds and deletes old versions all through the run, chunk
// by chunk, while the split-merge storm cuts and joins the ranges under it
// (a split recomputes the halves' stats, a merge adds them and keeps the
// higher threshold). A GC that deleted a version a read at or above its
// threshold still sees (a key's newest, or a deletion before an older
// live version) would make a read return an older value or none: the
// per-key linearizability check and the set check catch either
// (TestCheckerRegister's "GC lost the newest version" and "GC let an
// older version show through"). A run in which GC collected nothing
// proves nothing and is invalid (gcCollected).

// gcFlags shorten the retention window and the GC interval.
var gcFlags = []string{"--history-retention", "2s", "--history-gc-interval", "200ms"}

func gcSplitMerge(r *run, rng *rand.Rand) (fault, string, error) {
	f, what, err := splitMergeStorm(r, rng)
	return f, what + ", with a 2 s retention window collected every 200 ms", err
}

// gcCollected says why the run proved nothing about GC: no running node
// reports a collected version (shale_gc_versions_collected_total).
func gcCollected(r *run) string {
	total := 0.0
	for _, nd := range r.c.nodes(false) {
		v, err := scrapeCounter(nd.httpAddr, "shale_gc_versions_collected_total")
		if err != nil {
			r.logf("reading node %d's GC metrics: %v", nd.id, err)
			continue
		}
		total += v
	}
	r.logf("GC collected %.0f versions", total)
	if total == 0 {
		return "GC collected no version"
	}
	return ""
}

// scrapeCounter reads one unlabelled series from a node's /metrics.
func scrapeCounter(httpAddr, name string) (float64, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no series %s", name)
}
