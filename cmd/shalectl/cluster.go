package main

import (
	"fmt"
	"strconv"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/spf13/cobra"
)

func init() { register(newNodeCmd, newTransferLeaderCmd) }

func newNodeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Add nodes to the cluster's ranges or remove them",
	}
	cmd.AddCommand(newNodeAddCmd(g), newNodeRemoveCmd(g))
	return cmd
}

func newNodeAddCmd(g *globals) *cobra.Command {
	var registerOnly bool
	cmd := &cobra.Command{
		Use:   "add ADDRESS",
		Short: "Register a node and give it a voter of every range",
		Long: `node add registers the node serving at ADDRESS (host:port of its gRPC
server), or finds its ID if it is registered already (a node started with
--join registers itself), then adds a replica of every range on it: each
joins as a learner, catches up by snapshot and is promoted to voter. The
node must be running for the replicas to catch up.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			resp, err := c.AddNode(ctx, &kvpb.NodeDescriptor{Address: args[0]})
			if err != nil {
				return g.withEndpoints(err)
			}
			id := resp.GetNodeId()
			out := cmd.OutOrStdout()
			// With --json, one object at the end: {nodeId, address, ranges:
			// [{rangeId, added, generation}]}.
			type rangeResult struct {
				RangeID    uint64 `json:"rangeId"`
				Added      bool   `json:"added"`
				Generation uint64 `json:"generation"`
			}
			var results []rangeResult
			report := func() error {
				if !g.json {
					return nil
				}
				return writeJSON(out, map[string]any{"nodeId": id, "address": args[0], "ranges": results})
			}
			if !g.json {
				fmt.Fprintf(out, "node %d registered at %s\n", id, args[0])
			}
			if registerOnly {
				return report()
			}
			ranges, err := c.Ranges(ctx)
			if err != nil {
				return g.withEndpoints(err)
			}
			for _, rs := range ranges.GetRanges() {
				d := rs.GetRangeDescriptor()
				if hasVoter(d, id) {
					results = append(results, rangeResult{RangeID: d.GetRangeId(), Generation: d.GetGeneration()})
					if !g.json {
						fmt.Fprintf(out, "range %d: already a voter on node %d\n", d.GetRangeId(), id)
					}
					continue
				}
				nd, err := c.ChangeReplicas(ctx, d.GetRangeId(), &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: id})
				if err != nil {
					return g.withEndpoints(fmt.Errorf("range %d: %w", d.GetRangeId(), err))
				}
				results = append(results, rangeResult{RangeID: d.GetRangeId(), Added: true, Generation: nd.GetGeneration()})
				if !g.json {
					fmt.Fprintf(out, "range %d: voter added on node %d (generation %d)\n", d.GetRangeId(), id, nd.GetGeneration())
				}
			}
			return report()
		},
	}
	cmd.Flags().BoolVar(&registerOnly, "register-only", false, "register the node but add no replicas")
	return cmd
}

func hasVoter(d *kvpb.RangeDescriptor, nodeID uint64) bool {
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == nodeID && rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_VOTER {
			return true
		}
	}
	return false
}

func newNodeRemoveCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove NODE_ID",
		Short: "Move a node's replicas to other nodes, then remove the node",
		Long: `node remove marks the node as being removed (placement then gives it
nothing), replaces its replica of every range on another live node (a
voter is added there and the node's removed in one change, so a range keeps
its replica count; with placement on, placement makes these moves and the
command waits for them), and then takes the node out of the cluster's
registry. Only a range with no other node to go to loses the replica
without a replacement. The node's process can then be stopped. Give it a
--timeout long enough for the moves (snapshots of the node's ranges).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || id == 0 {
				return fmt.Errorf("node ID %q: want a number > 0", args[0])
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			if err := c.RemoveNode(ctx, id, true); err != nil {
				return g.withEndpoints(err)
			}
			if g.json {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"nodeId": id, "removed": true})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %d removed\n", id)
			return nil
		},
	}
	return cmd
}

func newTransferLeaderCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "transfer-leader RANGE_ID NODE_ID",
		Short: "Move a range's leadership to its replica on a node",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			rangeID, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || rangeID == 0 {
				return fmt.Errorf("range ID %q: want a number > 0", args[0])
			}
			nodeID, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil || nodeID == 0 {
				return fmt.Errorf("node ID %q: want a number > 0", args[1])
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			if err := c.TransferLeader(ctx, rangeID, nodeID); err != nil {
				return g.withEndpoints(err)
			}
			if g.json {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"rangeId": rangeID, "leaderNodeId": nodeID})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "range %d: leader is now node %d\n", rangeID, nodeID)
			return nil
		},
	}
}
