package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
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

// WriteComparison writes a markdown table comparing pairs of runs of the
// same workload on two systems: a (normally Shale) against b (normally
// etcd). For each kind of request it gives both throughputs and p99
// latencies and their ratios a/b; a throughput ratio above 1 and a p99
// ratio below 1 favour a.
func WriteComparison(w io.Writer, pairs [][2]*Report) error {
	if len(pairs) == 0 {
		return fmt.Errorf("nothing to compare")
	}
	a, b := pairs[0][0].Target, pairs[0][1].Target
	fmt.Fprintf(w, "| workload | op | clients | %s ops/s | %s ops/s | ops/s %s/%s | %s p99 | %s p99 | p99 %s/%s |\n",
		a, b, a, b, a, b, a, b)
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, p := range pairs {
		ra, rb := p[0], p[1]
		if ra.Workload != rb.Workload || ra.Stale != rb.Stale {
			return fmt.Errorf("cannot compare %s with %s: different workloads", describe(ra), describe(rb))
		}
		name := ra.Workload
		if ra.Stale {
			name += " (stale)"
		}
		for _, x := range ra.Results {
			y := findOp(rb, x.Op)
			if y == nil {
				return fmt.Errorf("%s has no %s requests to compare with %s", describe(rb), x.Op, describe(ra))
			}
			fmt.Fprintf(w, "| %s | %s | %d | %.0f | %.0f | %s | %s | %s | %s |\n", name, x.Op, ra.Clients,
				x.OpsPerSec, y.OpsPerSec, ratio(x.OpsPerSec, y.OpsPerSec),
				fmtUs(x.P99Us), fmtUs(y.P99Us), ratio(float64(x.P99Us), float64(y.P99Us)))
		}
	}
	return nil
}

func describe(r *Report) string { return r.Target + " " + r.Workload }

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
