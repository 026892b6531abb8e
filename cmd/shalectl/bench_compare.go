package main

import (
	"github.com/shaledb/shale/cmd/shalectl/internal/bench"
	"github.com/spf13/cobra"
)

// newBenchCompareCmd is `shalectl bench-compare REPORT.json...`: a
// markdown table of ratios between two or more systems' `shalectl bench
// --json` reports (scripts/bench-vs-etcd uses it).
func newBenchCompareCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:   "bench-compare REPORT.json...",
		Short: "Compare `bench --json` reports of two or more systems as a markdown table (medians of repeated runs)",
		Long: "Group the reports by workload, then by system (its --label, else its target); every\n" +
			"workload must have runs of the same systems. The system of the first report is A; the\n" +
			"table gives the median ops/s and p99 of each system's runs (and, for runs with\n" +
			"--server-pids, the servers' CPU time and bytes written per request) with ratios A/X.",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var reports []*bench.Report
			for _, p := range args {
				r, err := bench.ReadReport(p)
				if err != nil {
					return err
				}
				reports = append(reports, r)
			}
			return bench.WriteComparison(cmd.OutOrStdout(), reports)
		},
	}
}
