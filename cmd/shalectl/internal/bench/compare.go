package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
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

// WriteComparison writes a markdown table comparing systems run on the
// same workloads. Reports are grouped by workload (with its client count
// and read consistency) and, within a workload, by system (Report.System:
// the label, else the target); every workload must have runs of the same
// two or more systems. The system of the first report is A (normally
// Shale); the table has one column per system and a ratio column A/X for
// each other system X. When a system ran a workload several times (rounds
// alternating between the systems, to even out a noisy machine), each
// figure is the median of its runs' figures. Rows, per kind of request:
// ops/s, p99 and failed requests (the sum over the runs); per workload,
// when every run watched its servers (Report.Server): the servers' CPU
// time, the bytes they wrote and the bytes that reached the device, each
// per request. A throughput ratio above 1 and the others below 1 favour A.
func WriteComparison(w io.Writer, reports []*Report) error {
	if len(reports) == 0 {
		return fmt.Errorf("nothing to compare")
	}
	type group struct {
		name    string
		clients int
		systems []string
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
		sys := r.System()
		if _, ok := g.runs[sys]; !ok {
			g.systems = append(g.systems, sys)
		}
		g.runs[sys] = append(g.runs[sys], r)
	}
	systems := groups[0].systems
	if len(systems) < 2 {
		return fmt.Errorf("%s with %d clients: runs of %v only; want runs of two or more systems", groups[0].name, groups[0].clients, systems)
	}
	for _, g := range groups {
		if !slices.Equal(g.systems, systems) {
			return fmt.Errorf("%s with %d clients: runs of %v, other workloads compare %v (in that order)", g.name, g.clients, g.systems, systems)
		}
	}
	a := systems[0]
	fmt.Fprintf(w, "| workload | clients | runs | measure | %s |", strings.Join(systems, " | "))
	for _, x := range systems[1:] {
		fmt.Fprintf(w, " %s/%s |", a, x)
	}
	fmt.Fprint(w, "\n|---|---:|---|---|")
	fmt.Fprint(w, strings.Repeat("---:|", 2*len(systems)-1))
	fmt.Fprintln(w)
	for _, g := range groups {
		var counts []string
		for _, sys := range systems {
			counts = append(counts, fmt.Sprint(len(g.runs[sys])))
		}
		runs := counts[0]
		if len(slices.Compact(slices.Clone(counts))) > 1 {
			runs = strings.Join(counts, "/") // uneven: say each system's
		}
		row := func(measure string, vals []float64, format func(float64) string, withRatio bool) {
			fmt.Fprintf(w, "| %s | %d | %s | %s |", g.name, g.clients, runs, measure)
			for _, v := range vals {
				fmt.Fprintf(w, " %s |", format(v))
			}
			for _, v := range vals[1:] {
				if withRatio {
					fmt.Fprintf(w, " %s |", ratio(vals[0], v))
				} else {
					fmt.Fprint(w, "  |")
				}
			}
			fmt.Fprintln(w)
		}
		for _, x := range g.runs[a][0].Results {
			ops := make([]float64, len(systems))
			p99 := make([]float64, len(systems))
			errs := make([]float64, len(systems))
			for i, sys := range systems {
				o, p, err := medians(g.runs[sys], x.Op)
				if err != nil {
					return err
				}
				ops[i], p99[i], errs[i] = o, float64(p), float64(errorsOf(g.runs[sys], x.Op))
			}
			row(x.Op+" ops/s", ops, func(v float64) string { return fmt.Sprintf("%.0f", v) }, true)
			row(x.Op+" p99", p99, func(v float64) string { return fmtUs(int64(v)) }, true)
			row(x.Op+" errors", errs, func(v float64) string { return fmt.Sprintf("%.0f", v) }, false)
		}
		cpu, written, device := make([]float64, len(systems)), make([]float64, len(systems)), make([]float64, len(systems))
		watched, onDevice := true, true
		for i, sys := range systems {
			var ok, dev bool
			cpu[i], written[i], device[i], ok, dev = usageMedians(g.runs[sys])
			watched, onDevice = watched && ok, onDevice && dev
		}
		if !watched {
			continue
		}
		row("server CPU per request", cpu, func(v float64) string { return fmtUs(int64(v + 0.5)) }, true)
		row("bytes servers wrote per request", written, fmtBytes, true)
		if onDevice {
			row("bytes to the device per request", device, fmtBytes, true)
		}
	}
	return nil
}

// usageMedians returns the medians over runs of the servers' CPU time in
// microseconds, of the bytes they wrote and of the bytes that reached
// the device, each per successful request; ok is false when a run did not
// watch its servers, onDevice false when a run could not count the
// device's bytes.
func usageMedians(runs []*Report) (cpuUs, written, device float64, ok, onDevice bool) {
	var c, wr, d []float64
	onDevice = true
	for _, r := range runs {
		n := int64(0)
		for _, res := range r.Results {
			n += res.Ops
		}
		if r.Server == nil || n == 0 {
			return 0, 0, 0, false, false
		}
		c = append(c, r.Server.CPUSeconds*1e6/float64(n))
		wr = append(wr, float64(r.Server.WriteBytes)/float64(n))
		d = append(d, float64(r.Server.DeviceBytes)/float64(n))
		onDevice = onDevice && r.Server.Device != ""
	}
	return median(c), median(wr), median(d), true, onDevice
}

// median is the lower median: for an even count it never flatters with
// an average of two runs.
func median(v []float64) float64 {
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

// fmtBytes prints a byte count per request: whole bytes, with one
// decimal below 10.
func fmtBytes(b float64) string {
	if b < 10 {
		return fmt.Sprintf("%.1f B", b)
	}
	return fmt.Sprintf("%.0f B", b)
}

// medians returns the median ops/s and p99 of op over runs.
func medians(runs []*Report, op string) (float64, int64, error) {
	var ops []float64
	var p99 []int64
	for _, r := range runs {
		res := findOp(r, op)
		if res == nil {
			return 0, 0, fmt.Errorf("a %s %s run has no %s requests", r.System(), r.Workload, op)
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
