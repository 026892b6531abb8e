package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Report is the outcome of a run. Its JSON form is what `shalectl bench
// --json` prints.
type Report struct {
	Target string `json:"target"`
	// Label names the system when Target alone does not (Config.Label).
	Label     string   `json:"label,omitempty"`
	Endpoints []string `json:"endpoints"`
	Workload  string   `json:"workload"`
	Clients   int      `json:"clients"`
	Conns     int      `json:"conns"`
	KeySize   int      `json:"key_size"`
	ValueSize int      `json:"value_size"`
	Keys      int64    `json:"keys"`
	BatchSize int      `json:"batch_size"`
	Stale     bool     `json:"stale"`
	// LoadSeconds is the untimed load phase, if there was one.
	LoadSeconds float64 `json:"load_seconds,omitempty"`
	// Seconds is the timed phase as it ran (the duration plus the last
	// requests in flight, or less if interrupted).
	Seconds float64 `json:"seconds"`
	// Results has one entry per kind of request the workload issued.
	Results []OpResult `json:"results"`
	// FirstError is the first failed request's error, if any failed.
	FirstError string `json:"first_error,omitempty"`
	// Server is what the watched servers spent during the timed phase
	// (Config.Watch), if they were watched.
	Server *Usage `json:"server,omitempty"`
}

// System is the name of the system the report measured: its label, or
// else its target.
func (r *Report) System() string {
	if r.Label != "" {
		return r.Label
	}
	return r.Target
}

// OpResult is one kind of request. Latencies are of successful requests,
// in microseconds.
type OpResult struct {
	Op string `json:"op"`
	// Ops is the successful requests; Errors the failed ones.
	Ops    int64 `json:"ops"`
	Errors int64 `json:"errors"`
	// Items is the keys the successful requests wrote or read (one per
	// request except multiget, readseq and dirwalk); Found is how many
	// of those read existed.
	Items       int64   `json:"items"`
	Found       int64   `json:"found"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	ItemsPerSec float64 `json:"items_per_sec"`
	MeanUs      float64 `json:"mean_us"`
	P50Us       int64   `json:"p50_us"`
	P95Us       int64   `json:"p95_us"`
	P99Us       int64   `json:"p99_us"`
	MaxUs       int64   `json:"max_us"`
}

func newReport(t Target, cfg Config) *Report {
	return &Report{
		Target: t.System, Label: cfg.Label, Endpoints: t.Endpoints, Workload: cfg.Workload,
		Clients: cfg.Clients, Conns: cfg.Conns, KeySize: cfg.KeySize, ValueSize: cfg.ValueSize,
		Keys: cfg.Keys, BatchSize: cfg.BatchSize, Stale: cfg.Stale,
	}
}

// fill merges the workers' recorders.
func (r *Report) fill(recs []*recorder, elapsed time.Duration) {
	r.Seconds = elapsed.Seconds()
	for k := range numOpKinds {
		merged := hdrhistogram.New(1, maxLatencyUs, 3)
		var res OpResult
		seen := false
		for _, rec := range recs {
			if rec.hist[k] != nil {
				merged.Merge(rec.hist[k])
				seen = true
			}
			if rec.errs[k] > 0 {
				seen = true
			}
			res.Errors += rec.errs[k]
			res.Items += rec.items[k]
			res.Found += rec.found[k]
			if rec.firstErr != nil && r.FirstError == "" {
				r.FirstError = rec.firstErr.Error()
			}
		}
		if !seen {
			continue
		}
		res.Op = k.String()
		res.Ops = merged.TotalCount()
		if r.Seconds > 0 {
			res.OpsPerSec = float64(res.Ops) / r.Seconds
			res.ItemsPerSec = float64(res.Items) / r.Seconds
		}
		if res.Ops > 0 {
			res.MeanUs = merged.Mean()
			res.P50Us = merged.ValueAtQuantile(50)
			res.P95Us = merged.ValueAtQuantile(95)
			res.P99Us = merged.ValueAtQuantile(99)
			res.MaxUs = merged.Max()
		}
		r.Results = append(r.Results, res)
	}
}

// Errors is the number of failed requests.
func (r *Report) Errors() int64 {
	n := int64(0)
	for _, res := range r.Results {
		n += res.Errors
	}
	return n
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes a heading line and a table: one row per kind of
// request with throughput and latency percentiles.
func (r *Report) WriteTable(w io.Writer) error {
	stale := ""
	if r.Stale {
		stale = " stale-reads"
	}
	fmt.Fprintf(w, "%s %s: %d clients, %d conns, %.1fs, %d-byte keys, %d-byte values, %d keys, batch %d%s\n",
		r.Target, r.Workload, r.Clients, r.Conns, r.Seconds, r.KeySize, r.ValueSize, r.Keys, r.BatchSize, stale)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tops\tops/s\tkeys/s\tp50\tp95\tp99\tmax\terrors\t")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%d\t\n", res.Op, res.Ops, res.OpsPerSec, res.ItemsPerSec,
			fmtUs(res.P50Us), fmtUs(res.P95Us), fmtUs(res.P99Us), fmtUs(res.MaxUs), res.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", strings.TrimSpace(r.FirstError))
	}
	return nil
}

// fmtUs prints a latency in the unit that keeps three digits readable.
func fmtUs(us int64) string {
	switch {
	case us < 1000:
		return fmt.Sprintf("%dµs", us)
	case us < 1_000_000:
		return fmt.Sprintf("%.2fms", float64(us)/1000)
	default:
		return fmt.Sprintf("%.2fs", float64(us)/1e6)
	}
}
