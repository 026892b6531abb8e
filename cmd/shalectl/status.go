package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
)

func newStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Report on the node the client reaches: identity, ranges, engine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(st)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "%s\n", b)
				return err
			}
			printStatus(out, st)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

func printStatus(out interface{ Write([]byte) (int, error) }, st *kvpb.StatusResponse) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	n := st.GetNode()
	started := time.Unix(0, st.GetStartedUnixNanos())
	fmt.Fprintf(w, "node\t%d\n", n.GetNodeId())
	fmt.Fprintf(w, "address\t%s\n", n.GetAddress())
	fmt.Fprintf(w, "http\t%s\n", n.GetHttpAddress())
	fmt.Fprintf(w, "cluster\t%s\n", st.GetClusterId())
	fmt.Fprintf(w, "version\t%s\n", st.GetVersion())
	fmt.Fprintf(w, "started\t%s (up %s)\n", started.Format(time.RFC3339), time.Since(started).Round(time.Second))
	members := make([]string, 0, len(st.GetMembers()))
	for _, m := range st.GetMembers() {
		members = append(members, fmt.Sprintf("%d@%s", m.GetNodeId(), m.GetAddress()))
	}
	fmt.Fprintf(w, "members\t%s\n", strings.Join(members, " "))
	for _, r := range st.GetRanges() {
		d := r.GetDescriptor_()
		fmt.Fprintf(w, "range %d\t[%q, %q) gen %d, leader node %d, ~%d keys, ~%d bytes\n",
			d.GetRangeId(), d.GetStartKey(), d.GetEndKey(), d.GetGeneration(), r.GetLeaderNodeId(),
			r.GetApproximateKeys(), r.GetApproximateBytes())
	}
	if e := st.GetEngine(); e != nil {
		fmt.Fprintf(w, "engine\tuser bytes written %d, WAL bytes %d, write amplification %.2f\n",
			e.GetUserBytesWritten(), e.GetWalBytesWritten(), e.GetWriteAmplification())
		fmt.Fprintf(w, "\tmemtable %d bytes, block cache hits %d misses %d\n",
			e.GetMemtableBytes(), e.GetBlockCacheHits(), e.GetBlockCacheMisses())
		var levels []string
		for i, f := range e.GetLevelFiles() {
			if f > 0 {
				levels = append(levels, fmt.Sprintf("L%d: %d files %d bytes", i, f, e.GetLevelBytes()[i]))
			}
		}
		if len(levels) > 0 {
			fmt.Fprintf(w, "\t%s\n", strings.Join(levels, ", "))
		}
	}
}
