package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

func init() { register(newHotCmd) }

func newHotCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hot",
		Short: "The busiest ranges and keys, as every node measures them",
		Long: `hot asks every node for the load it served over its last window (10 s):
"hot ranges" lists ranges by requests per second, with bytes per second
and their share of the node's serving time; "hot keys" lists the keys a
sample of requests touched most. A key that is most of its range's load
is named a single-key hotspot: a split cannot spread it (it divides keys,
not one key's requests); cache the value in the application or spread
the key over several. A node that does not answer is reported and
skipped.`,
	}
	cmd.AddCommand(newHotRangesCmd(g), newHotKeysCmd(g))
	return cmd
}

// hotPerNode bounds the wait for one node's answer.
const hotPerNode = 2 * time.Second

func newHotRangesCmd(g *globals) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "ranges",
		Short: "The busiest ranges by requests per second (per node that serves them)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit <= 0 {
				return fmt.Errorf("--limit %d: want a number > 0", limit)
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			nodes, err := c.HotSpots(ctx, limit, hotPerNode)
			if err != nil {
				return g.withEndpoints(err)
			}
			var ranges []client.HotRange
			for _, n := range nodes {
				ranges = append(ranges, n.Ranges...)
			}
			slices.SortStableFunc(ranges, func(a, b client.HotRange) int { return cmp.Compare(b.RequestsPerSecond, a.RequestsPerSecond) })
			ranges = ranges[:min(len(ranges), limit)]
			out := cmd.OutOrStdout()
			if g.json {
				list := []object{}
				for _, r := range ranges {
					o := object{{"nodeId", r.NodeID}, {"rangeId", r.RangeID}}
					g.addBytes(&o, "startKey", r.StartKey)
					g.addBytes(&o, "endKey", r.EndKey)
					o = append(o, field{"leader", r.Leader}, field{"requestsPerSecond", r.RequestsPerSecond},
						field{"bytesPerSecond", r.BytesPerSecond}, field{"cpuShare", r.CPUShare})
					list = append(list, o)
				}
				return writeJSON(out, object{{"ranges", list}, {"unreachable", unreachable(nodes)}})
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NODE\tRANGE\tSPAN\tLEADER\tREQ/S\tBYTES/S\tCPU")
			for _, r := range ranges {
				fmt.Fprintf(w, "%d\t%d\t%s\t%v\t%.1f\t%.0f\t%.0f%%\n", r.NodeID, r.RangeID,
					g.span(&kvpb.RangeDescriptor{RangeId: r.RangeID, StartKey: r.StartKey, EndKey: r.EndKey}),
					r.Leader, r.RequestsPerSecond, r.BytesPerSecond, 100*r.CPUShare)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return reportUnreachable(cmd.ErrOrStderr(), nodes)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 10, "ranges to list")
	return cmd
}

func newHotKeysCmd(g *globals) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "The busiest sampled keys, naming single-key hotspots a split cannot fix",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit <= 0 {
				return fmt.Errorf("--limit %d: want a number > 0", limit)
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			nodes, err := c.HotSpots(ctx, limit, hotPerNode)
			if err != nil {
				return g.withEndpoints(err)
			}
			var keys []client.HotKey
			for _, n := range nodes {
				keys = append(keys, n.Keys...)
			}
			slices.SortStableFunc(keys, func(a, b client.HotKey) int { return cmp.Compare(b.RequestsPerSecond, a.RequestsPerSecond) })
			keys = keys[:min(len(keys), limit)]
			out := cmd.OutOrStdout()
			if g.json {
				list := []object{}
				for _, k := range keys {
					o := object{{"nodeId", k.NodeID}}
					g.addBytes(&o, "key", k.Key)
					o = append(o, field{"rangeId", k.RangeID}, field{"requestsPerSecond", k.RequestsPerSecond},
						field{"errorPerSecond", k.ErrorPerSecond}, field{"rangeShare", k.RangeShare},
						field{"singleKeyHotspot", k.SingleKeyHotspot()})
					list = append(list, o)
				}
				return writeJSON(out, object{{"keys", list}, {"unreachable", unreachable(nodes)}})
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NODE\tKEY\tRANGE\tREQ/S (est.)\tRANGE SHARE\tNOTE")
			for _, k := range keys {
				note := "-"
				if k.SingleKeyHotspot() {
					note = "single-key hotspot: a split cannot spread it"
				}
				fmt.Fprintf(w, "%d\t%s\t%d\t%.1f ±%.1f\t%.0f%%\t%s\n", k.NodeID, g.display(k.Key), k.RangeID,
					k.RequestsPerSecond, k.ErrorPerSecond, 100*k.RangeShare, note)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return reportUnreachable(cmd.ErrOrStderr(), nodes)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 10, "keys to list")
	return cmd
}

// unreachable lists the nodes that did not answer, for --json.
func unreachable(nodes []client.NodeHotSpots) []object {
	out := []object{}
	for _, n := range nodes {
		if n.Err != nil {
			out = append(out, object{{"nodeId", n.NodeID}, {"address", n.Address}, {"error", n.Err.Error()}})
		}
	}
	return out
}

// reportUnreachable names, on stderr, the nodes that did not answer: the
// table is then partial.
func reportUnreachable(w io.Writer, nodes []client.NodeHotSpots) error {
	for _, n := range nodes {
		if n.Err != nil {
			if _, err := fmt.Fprintf(w, "node %d (%s) did not answer: %v\n", n.NodeID, n.Address, n.Err); err != nil {
				return err
			}
		}
	}
	return nil
}
