package main

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/spf13/cobra"
)

// Sharding commands (docs/sharding.md): ranges, nodes, split, merge,
// move-replica, decommission. transfer-leader is in cluster.go.

func init() {
	register(newRangesCmd, newNodesCmd, newSplitCmd, newMergeCmd, newMoveReplicaCmd, newDecommissionCmd)
}

func parseID(what, s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("%s %q: want a number > 0", what, s)
	}
	return v, nil
}

func newRangesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ranges",
		Short: "List every range with its span, leader, replicas, size and QPS",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			rs, err := c.Ranges(ctx)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.json {
				return g.printProto(out, rs)
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "RANGE\tSPAN\tGEN\tLEADER\tREPLICAS\tBYTES\tKEYS\tQPS")
			for _, r := range rs.GetRanges() {
				d := r.GetRangeDescriptor()
				leader := "?"
				if r.GetLeaderNodeId() != 0 {
					leader = strconv.FormatUint(r.GetLeaderNodeId(), 10)
				}
				fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\t%d\t%d\t%.1f\n", d.GetRangeId(), g.span(d), d.GetGeneration(), leader,
					replicaList(d), r.GetApproximateBytes(), r.GetApproximateKeys(), r.GetQps())
			}
			return w.Flush()
		},
	}
	return cmd
}

// replicaList is "n1,n2,n3(learner)".
func replicaList(d *kvpb.RangeDescriptor) string {
	var parts []string
	for _, rd := range d.GetReplicas() {
		p := "n" + strconv.FormatUint(rd.GetNodeId(), 10)
		if t := rd.GetType(); t != kvpb.ReplicaType_REPLICA_TYPE_VOTER {
			p += "(" + strings.ToLower(strings.TrimPrefix(t.String(), "REPLICA_TYPE_")) + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ",")
}

func newNodesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "List every node with its state, replicas, leaders, bytes and QPS",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			ns, err := c.Nodes(ctx)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.json {
				return g.printProto(out, ns)
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NODE\tADDRESS\tSTATE\tREPLICAS\tLEADERS\tBYTES\tQPS\tHOST_CPU")
			for _, n := range ns.GetNodes() {
				fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%d\t%.1f\t%s\n", n.GetNode().GetNodeId(), n.GetNode().GetAddress(),
					nodeState(n.GetState()), n.GetReplicas(), n.GetLeaders(), n.GetUsedBytes(), n.GetQps(), hostCPU(n.GetCpu()))
			}
			return w.Flush()
		},
	}
	return cmd
}

// hostCPU formats a node's host CPU use over the last 10 s ("-" if
// unknown).
func hostCPU(c *kvpb.NodeCPU) string {
	if !c.GetKnown() {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*c.GetHostBusy())
}

func newSplitCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "split KEY",
		Short: "Split the range holding KEY at KEY (no data moves)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := g.parseArg("key", args[0])
			if err != nil {
				return err
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			l, r, err := c.Split(ctx, key)
			if err != nil {
				return err
			}
			if g.json {
				return g.printProto(cmd.OutOrStdout(), &kvpb.SplitResponse{Left: l, Right: r})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "range %d %s | range %d %s\n", l.GetRangeId(), g.span(l), r.GetRangeId(), g.span(r))
			return nil
		},
	}
	return cmd
}

func newMergeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "merge KEY",
		Short: "Merge the range holding KEY with its right-hand neighbour",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := g.parseArg("key", args[0])
			if err != nil {
				return err
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			d, err := c.Merge(ctx, key)
			if err != nil {
				return err
			}
			if g.json {
				return g.printProto(cmd.OutOrStdout(), &kvpb.MergeResponse{Merged: d})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "range %d %s\n", d.GetRangeId(), g.span(d))
			return nil
		},
	}
	return cmd
}

func newMoveReplicaCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "move-replica RANGE_ID FROM_NODE TO_NODE",
		Short: "Move a range's replica from one node to another (learner, snapshot, promote, remove)",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			rangeID, err := parseID("range ID", args[0])
			if err != nil {
				return err
			}
			from, err := parseID("node ID", args[1])
			if err != nil {
				return err
			}
			to, err := parseID("node ID", args[2])
			if err != nil {
				return err
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			d, err := c.MoveReplica(ctx, rangeID, from, to)
			if err != nil {
				return err
			}
			if g.json {
				return g.printProto(cmd.OutOrStdout(), d)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "range %d: replicas %s (generation %d)\n", d.GetRangeId(), replicaList(d), d.GetGeneration())
			return nil
		},
	}
	return cmd
}

func newDecommissionCmd(g *globals) *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "decommission NODE_ID",
		Short: "Drain a node: its replicas and leaders move to other nodes",
		Long: `decommission marks the node as decommissioning; the placement controller
then moves its replicas and leaders away. --wait waits (within --timeout)
until it holds none. Decommissioning cannot be undone.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("node ID", args[0])
			if err != nil {
				return err
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			left, err := c.Decommission(ctx, id, wait)
			if err != nil {
				return err
			}
			if g.json {
				return g.printProto(cmd.OutOrStdout(), &kvpb.DecommissionResponse{RemainingReplicas: left})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %d: decommissioning, %d replicas left\n", id, left)
			if wait && left > 0 {
				return fmt.Errorf("node %d still holds %d replicas at the deadline", id, left)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the node holds no replica")
	return cmd
}
