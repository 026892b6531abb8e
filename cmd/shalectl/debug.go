package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
	"github.com/spf13/cobra"
)

func init() { register(newDebugCmd) }

func newDebugCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "debug",
		Short: "Inspect a node's engine, a range, or a range's Raft state",
	}
	cmd.AddCommand(newDebugEngineCmd(g), newDebugRangeCmd(g, false), newDebugRangeCmd(g, true))
	return cmd
}

func newDebugEngineCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "engine-stats",
		Short: "The storage engine statistics of the node reached (pick it with --endpoints)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			st, err := c.Status(ctx)
			if err != nil {
				return g.withEndpoints(err)
			}
			e := st.GetEngine()
			out := cmd.OutOrStdout()
			if g.json {
				return writeJSON(out, map[string]any{"nodeId": st.GetNode().GetNodeId(), "address": st.GetNode().GetAddress(), "engine": g.protoObject(e)})
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "node\t%d at %s\n", st.GetNode().GetNodeId(), st.GetNode().GetAddress())
			fmt.Fprintf(w, "user bytes written\t%d\n", e.GetUserBytesWritten())
			fmt.Fprintf(w, "WAL bytes written\t%d\n", e.GetWalBytesWritten())
			fmt.Fprintf(w, "flush bytes written\t%d\n", e.GetFlushBytesWritten())
			fmt.Fprintf(w, "compaction bytes written\t%d\n", e.GetCompactionBytesWritten())
			fmt.Fprintf(w, "compaction bytes read\t%d\n", e.GetCompactionBytesRead())
			fmt.Fprintf(w, "write amplification\t%.2f\n", e.GetWriteAmplification())
			fmt.Fprintf(w, "bytes read\t%d\n", e.GetBytesRead())
			fmt.Fprintf(w, "stall time\t%.3fs\n", float64(e.GetStallMicros())/1e6)
			hits, misses := e.GetBlockCacheHits(), e.GetBlockCacheMisses()
			ratio := "-"
			if hits+misses > 0 {
				ratio = fmt.Sprintf("%.1f%%", 100*float64(hits)/float64(hits+misses))
			}
			fmt.Fprintf(w, "block cache\t%d hits, %d misses (%s hits)\n", hits, misses, ratio)
			fmt.Fprintf(w, "bloom filter useful\t%d\n", e.GetBloomFilterUseful())
			fmt.Fprintf(w, "memtable bytes\t%d\n", e.GetMemtableBytes())
			for i, f := range e.GetLevelFiles() {
				var b uint64
				if i < len(e.GetLevelBytes()) {
					b = e.GetLevelBytes()[i]
				}
				if f > 0 || b > 0 {
					fmt.Fprintf(w, "L%d\t%d files, %d bytes\n", i, f, b)
				}
			}
			return w.Flush()
		},
	}
}

// replicaReport is one replica of a range as its own node reports it.
type replicaReport struct {
	desc    *kvpb.ReplicaDescriptor
	address string
	status  *kvpb.RangeStatus // nil: the node could not be asked
	err     string
}

// rangeReport asks the cluster for range id's descriptor and every one of
// its replicas' nodes for their view of it.
func rangeReport(ctx context.Context, c *client.Client, id uint64) (*kvpb.RangeStatus, []replicaReport, error) {
	ranges, err := c.Ranges(ctx)
	if err != nil {
		return nil, nil, err
	}
	var rs *kvpb.RangeStatus
	var known []string
	for _, r := range ranges.GetRanges() {
		known = append(known, strconv.FormatUint(r.GetRangeDescriptor().GetRangeId(), 10))
		if r.GetRangeDescriptor().GetRangeId() == id {
			rs = r
		}
	}
	if rs == nil {
		return nil, nil, fmt.Errorf("range %d does not exist (ranges: %s)", id, strings.Join(known, ", "))
	}
	// Every node's status, in parallel over the client's credentials.
	all, err := c.NodeStatuses(ctx, nodeStatusTimeout)
	if err != nil {
		return nil, nil, err
	}
	byNode := make(map[uint64]client.NodeStatus)
	for _, ns := range all {
		byNode[ns.NodeID] = ns
	}
	reps := make([]replicaReport, len(rs.GetRangeDescriptor().GetReplicas()))
	for i, rd := range rs.GetRangeDescriptor().GetReplicas() {
		ns := byNode[rd.GetNodeId()]
		reps[i] = replicaReport{desc: rd, address: ns.Address, err: "the node holds no replica"}
		if ns.Status == nil {
			reps[i].err = "unreachable at " + ns.Address
			continue
		}
		for _, r := range ns.Status.GetRanges() {
			if r.GetRangeDescriptor().GetRangeId() == id {
				reps[i].status, reps[i].err = r, ""
			}
		}
	}
	sort.Slice(reps, func(i, j int) bool { return reps[i].desc.GetNodeId() < reps[j].desc.GetNodeId() })
	return rs, reps, nil
}

// newDebugRangeCmd is `debug range ID` or, with raft, `debug raft ID`.
func newDebugRangeCmd(g *globals, raft bool) *cobra.Command {
	use, short := "range RANGE_ID", "A range: span, generation, leader, replicas, size"
	if raft {
		use, short = "raft RANGE_ID", "Raft state of each replica of a range: state, term, commit, applied, log"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || id == 0 {
				return fmt.Errorf("range ID %q: want a number > 0", args[0])
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			rs, reps, err := rangeReport(ctx, c, id)
			if err != nil {
				return g.withEndpoints(err)
			}
			out := cmd.OutOrStdout()
			if g.json {
				jr := []object{}
				for _, r := range reps {
					j := object{{"nodeId", r.desc.GetNodeId()}, {"address", r.address}, {"type", replicaType(r.desc)}}
					if r.status != nil {
						j.add("status", g.protoObject(r.status))
					}
					if r.err != "" {
						j.add("error", r.err)
					}
					jr = append(jr, j)
				}
				return writeJSON(out, object{{"range", g.protoObject(rs)}, {"replicas", jr}})
			}
			if raft {
				return g.printRaft(out, rs, reps)
			}
			return g.printRange(out, rs, reps)
		},
	}
}

func replicaType(rd *kvpb.ReplicaDescriptor) string {
	return strings.ToLower(strings.TrimPrefix(rd.GetType().String(), "REPLICA_TYPE_"))
}

func (g *globals) printRange(out io.Writer, rs *kvpb.RangeStatus, reps []replicaReport) error {
	d := rs.GetRangeDescriptor()
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "range\t%d\n", d.GetRangeId())
	fmt.Fprintf(w, "span\t%s\n", g.span(d))
	fmt.Fprintf(w, "generation\t%d\n", d.GetGeneration())
	leader := "none known"
	if id := rs.GetLeaderNodeId(); id != 0 {
		leader = fmt.Sprintf("node %d", id)
	}
	fmt.Fprintf(w, "leader\t%s\n", leader)
	fmt.Fprintf(w, "size\t~%d keys, ~%d bytes\n", rs.GetApproximateKeys(), rs.GetApproximateBytes())
	fmt.Fprintf(w, "qps\t%.1f\n", rs.GetQps())
	w.Flush()
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tREPLICA\tTYPE\tADDRESS\tSTATE")
	for _, r := range reps {
		state := r.err
		if r.status != nil {
			state = r.status.GetRaft().GetState()
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\n", r.desc.GetNodeId(), r.desc.GetReplicaId(), replicaType(r.desc), r.address, state)
	}
	return w.Flush()
}

func (g *globals) printRaft(out io.Writer, rs *kvpb.RangeStatus, reps []replicaReport) error {
	fmt.Fprintf(out, "range %d %s\n\n", rs.GetRangeDescriptor().GetRangeId(), g.span(rs.GetRangeDescriptor()))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tREPLICA\tSTATE\tTERM\tLEADER\tCOMMIT\tAPPLIED\tLOG (first, last]")
	for _, r := range reps {
		if r.status == nil {
			fmt.Fprintf(w, "%d\t%d\t%s\t\t\t\t\t\n", r.desc.GetNodeId(), r.desc.GetReplicaId(), r.err)
			continue
		}
		rf := r.status.GetRaft()
		fmt.Fprintf(w, "%d\t%d\t%s\t%d\t%d\t%d\t%d\t(%d, %d]\n", r.desc.GetNodeId(), r.desc.GetReplicaId(), rf.GetState(),
			rf.GetTerm(), rf.GetLeaderReplicaId(), rf.GetCommitIndex(), rf.GetAppliedIndex(), rf.GetTruncatedIndex(), rf.GetLastIndex())
	}
	return w.Flush()
}
