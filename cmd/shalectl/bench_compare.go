package main

import (
	"github.com/shaledb/shale/cmd/shalectl/internal/bench"
	"github.com/spf13/cobra"
)

// newBenchCompareCmd is `shalectl bench-compare REPORT.json...`: a
// markdown table of ratios between two systems' `shalectl bench --json`
// reports (scripts/bench-vs-etcd uses it).
func newBenchCompareCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:   "bench-compare REPORT.json...",
		Short: "Compare `bench --json` reports of two systems as a markdown table (medians of repeated runs)",
		Long: "Group the reports by workload; each workload must have runs of exactly two targets.\n" +
			"The target of the first report is A, the other B; the table gives the median ops/s\n" +
			"and p99 of each target's runs and the ratios A/B.",
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
