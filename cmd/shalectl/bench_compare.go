package main

import (
	"fmt"

	"github.com/shaledb/shale/cmd/shalectl/internal/bench"
	"github.com/spf13/cobra"
)

// newBenchCompareCmd is `shalectl bench-compare A.json B.json [...]`: a
// markdown table of ratios between pairs of `shalectl bench --json`
// reports (scripts/bench-vs-etcd uses it).
func newBenchCompareCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "bench-compare A.json B.json [A2.json B2.json ...]",
		Short: "Compare pairs of `bench --json` reports (A against B) as a markdown table",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || len(args)%2 != 0 {
				return fmt.Errorf("want pairs of report files, got %d files", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var pairs [][2]*bench.Report
			for i := 0; i < len(args); i += 2 {
				a, err := bench.ReadReport(args[i])
				if err != nil {
					return err
				}
				b, err := bench.ReadReport(args[i+1])
				if err != nil {
					return err
				}
				pairs = append(pairs, [2]*bench.Report{a, b})
			}
			return bench.WriteComparison(cmd.OutOrStdout(), pairs)
		},
	}
}
