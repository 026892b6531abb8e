package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
)

// ReadReport reads a report written by WriteJSON.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a bench report: %w", path, err)
	}
	if r.Target == "" || r.Workload == "" {
		return nil, fmt.Errorf("%s: not a bench report (no target or workload)", path)
	}
	return &r, nil
}

// WriteComparison writes a markdown table comparing two systems run on the
// same workloads. Reports are grouped by workload (with its client count
// and read consistency); each group must hold runs of exactly two targets,
// and the target seen first is A (normally Shale), the other B (normally
// etcd). When a target ran a workload several times (rounds alternating
// between the systems, to even out a noisy machine), the table gives the
// median of its runs' ops/s and of their p99s. Ratios are A/B: a throughput
// ratio above 1 and a p99 ratio below 1 favour A. The last column counts
// the failed requests of all runs, A's then B's.
func WriteComparison(w io.Writer, reports []*Report) error {
	if len(reports) == 0 {
		return fmt.Errorf("nothing to compare")
	}
	type group struct {
		name    string
		clients int
		targets []string
		runs    map[string][]*Report
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, r := range reports {
		name := r.Workload
		if r.Stale {
			name += " (stale)"
		}
		key := fmt.Sprintf("%s/%d", name, r.Clients)
		g := byKey[key]
		if g == nil {
			g = &group{name: name, clients: r.Clients, runs: map[string][]*Report{}}
			byKey[key] = g
			groups = append(groups, g)
		}
		if _, ok := g.runs[r.Target]; !ok {
			g.targets = append(g.targets, r.Target)
		}
		g.runs[r.Target] = append(g.runs[r.Target], r)
	}
	a, b := "", ""
	for _, g := range groups {
		if len(g.targets) != 2 {
			return fmt.Errorf("%s with %d clients: runs of %v; want runs of exactly two targets", g.name, g.clients, g.targets)
		}
		if a == "" {
			a, b = g.targets[0], g.targets[1]
		}
		if g.targets[0] != a || g.targets[1] != b {
			return fmt.Errorf("%s: targets %v, other workloads compare %s with %s", g.name, g.targets, a, b)
		}
	}
	fmt.Fprintf(w, "| workload | op | clients | runs | %s ops/s | %s ops/s | ops/s %s/%s | %s p99 | %s p99 | p99 %s/%s | errors %s/%s |\n",
		a, b, a, b, a, b, a, b, a, b)
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, g := range groups {
		ra, rb := g.runs[a], g.runs[b]
		for _, x := range ra[0].Results {
			opsA, p99A, err := medians(ra, x.Op)
			if err != nil {
				return err
			}
			opsB, p99B, err := medians(rb, x.Op)
			if err != nil {
				return err
			}
			runs := fmt.Sprint(len(ra))
			if len(rb) != len(ra) {
				runs = fmt.Sprintf("%d/%d", len(ra), len(rb))
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %.0f | %.0f | %s | %s | %s | %s | %d/%d |\n", g.name, x.Op, g.clients, runs,
				opsA, opsB, ratio(opsA, opsB), fmtUs(p99A), fmtUs(p99B), ratio(float64(p99A), float64(p99B)),
				errorsOf(ra, x.Op), errorsOf(rb, x.Op))
		}
	}
	return nil
}

// medians returns the median ops/s and p99 of op over runs.
func medians(runs []*Report, op string) (float64, int64, error) {
	var ops []float64
	var p99 []int64
	for _, r := range runs {
		res := findOp(r, op)
		if res == nil {
			return 0, 0, fmt.Errorf("a %s %s run has no %s requests", r.Target, r.Workload, op)
		}
		ops = append(ops, res.OpsPerSec)
		p99 = append(p99, res.P99Us)
	}
	slices.Sort(ops)
	slices.Sort(p99)
	// The lower median for an even count: never flatters with an average
	// of two runs.
	m := (len(ops) - 1) / 2
	return ops[m], p99[m], nil
}

// errorsOf sums the failed requests of op over runs.
func errorsOf(runs []*Report, op string) int64 {
	n := int64(0)
	for _, r := range runs {
		if res := findOp(r, op); res != nil {
			n += res.Errors
		}
	}
	return n
}

func findOp(r *Report, op string) *OpResult {
	for i := range r.Results {
		if r.Results[i].Op == op {
			return &r.Results[i]
		}
	}
	return nil
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
