package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
	"github.com/spf13/cobra"
)

func init() { register(newStatusCmd) }

func newStatusCmd(g *globals) *cobra.Command {
	var nodeOnly bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Report on the cluster: nodes, ranges, leaders, applied indexes",
		Long: `status reports on the cluster as its nodes see it: every node with its
liveness, then every range with its leader and, for each replica, its Raft
state and applied index (asked of each node in turn). --node reports on the
node the client reaches instead: identity, its replicas, engine statistics.
With --json: {clusterId, version, reached, nodes, ranges}, or with --node
the reached node's status alone.`,
		Args: cobra.NoArgs,
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
			out := cmd.OutOrStdout()
			if g.json && nodeOnly {
				return g.printProto(out, st)
			}
			if g.json {
				// The cluster view: the reached node's status, the
				// registry's nodes and meta's ranges.
				nodes, err := c.Nodes(ctx)
				if err != nil {
					return g.withEndpoints(err)
				}
				ranges, err := c.Ranges(ctx)
				if err != nil {
					return g.withEndpoints(err)
				}
				nodeList, rangeList := []object{}, []object{}
				for _, n := range nodes.GetNodes() {
					nodeList = append(nodeList, g.protoObject(n))
				}
				for _, r := range ranges.GetRanges() {
					rangeList = append(rangeList, g.protoObject(r))
				}
				return writeJSON(out, object{{"clusterId", st.GetClusterId()}, {"version", st.GetVersion()},
					{"reached", g.protoObject(st)}, {"nodes", nodeList}, {"ranges", rangeList}})
			}
			if nodeOnly {
				g.printStatus(out, st)
				return nil
			}
			return g.withEndpoints(g.printCluster(ctx, out, c, st))
		},
	}
	cmd.Flags().BoolVar(&nodeOnly, "node", false, "report on the reached node only")
	return cmd
}

// printCluster prints the nodes table and the ranges table.
func (g *globals) printCluster(ctx context.Context, out io.Writer, c *client.Client, self *kvpb.StatusResponse) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	ranges, err := c.Ranges(ctx)
	if err != nil {
		return err
	}
	// Every node's replicas' Raft state, asked in parallel over the
	// client's credentials, each node within its own timeout.
	statuses := make(map[uint64]*kvpb.StatusResponse)
	all, err := c.NodeStatuses(ctx, nodeStatusTimeout)
	if err != nil {
		return err
	}
	for _, ns := range all {
		if ns.Status != nil {
			statuses[ns.NodeID] = ns.Status
		}
	}
	statuses[self.GetNode().GetNodeId()] = self

	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "cluster\t%s\n", self.GetClusterId())
	fmt.Fprintf(w, "version\t%s\n", self.GetVersion())
	fmt.Fprintf(w, "reached\tnode %d at %s\n", self.GetNode().GetNodeId(), self.GetNode().GetAddress())
	w.Flush()
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tADDRESS\tHTTP\tSTATE\tREPLICAS\tLEADERS\tDISK\tLAST SEEN")
	var full []string
	for _, ns := range nodes.GetNodes() {
		n := ns.GetNode()
		seen := "-"
		if t := ns.GetLastHeartbeatUnixNanos(); t != 0 {
			seen = time.Since(time.Unix(0, t)).Round(time.Millisecond).String() + " ago"
		}
		disk := "?"
		if st := statuses[n.GetNodeId()]; st != nil {
			disk = diskSummary(st.GetDisk())
			if st.GetDisk().GetFull() {
				full = append(full, fmt.Sprintf("node %d: disk full (%s) in %s: writes to the ranges it leads are refused until space returns",
					n.GetNodeId(), st.GetDisk().GetReason(), st.GetDisk().GetDataDir()))
			}
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", n.GetNodeId(), n.GetAddress(), n.GetHttpAddress(),
			nodeState(ns.GetState()), ns.GetReplicas(), ns.GetLeaders(), disk, seen)
	}
	w.Flush()
	for _, f := range full {
		fmt.Fprintln(out, "WARNING: "+f)
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RANGE\tSPAN\tGEN\tLEADER\tREPLICAS (node:state:applied index)")
	for _, rs := range ranges.GetRanges() {
		d := rs.GetRangeDescriptor()
		var reps []string
		for _, rd := range d.GetReplicas() {
			state, applied := "?", "?"
			if st := statuses[rd.GetNodeId()]; st != nil {
				for _, r := range st.GetRanges() {
					if r.GetRangeDescriptor().GetRangeId() == d.GetRangeId() {
						state = r.GetRaft().GetState()
						applied = fmt.Sprint(r.GetRaft().GetAppliedIndex())
					}
				}
			} else {
				state = "unreachable"
			}
			kind := ""
			if t := rd.GetType(); t != kvpb.ReplicaType_REPLICA_TYPE_VOTER {
				kind = "(" + strings.ToLower(strings.TrimPrefix(t.String(), "REPLICA_TYPE_")) + ")"
			}
			reps = append(reps, fmt.Sprintf("n%d%s:%s:%s", rd.GetNodeId(), kind, state, applied))
		}
		sort.Strings(reps)
		leader := "none"
		if id := leaderNode(rs, statuses); id != 0 {
			leader = fmt.Sprintf("n%d", id)
		}
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\n", d.GetRangeId(), g.span(d), d.GetGeneration(), leader, strings.Join(reps, " "))
	}
	return w.Flush()
}

// nodeStatusTimeout bounds the wait for one node's status: a paused node
// is reported as unreachable instead of holding up the report.
const nodeStatusTimeout = 2 * time.Second

// leaderNode is the range's leader as its replicas report it.
func leaderNode(rs *kvpb.RangeStatus, statuses map[uint64]*kvpb.StatusResponse) uint64 {
	if id := rs.GetLeaderNodeId(); id != 0 {
		return id
	}
	for _, st := range statuses {
		for _, r := range st.GetRanges() {
			if r.GetRangeDescriptor().GetRangeId() == rs.GetRangeDescriptor().GetRangeId() && r.GetLeaderNodeId() != 0 {
				return r.GetLeaderNodeId()
			}
		}
	}
	return 0
}

func nodeState(s kvpb.NodeState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "NODE_STATE_"))
}

// printStatus prints what one node reports about itself.
func (g *globals) printStatus(out interface{ Write([]byte) (int, error) }, st *kvpb.StatusResponse) {
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
	if d := st.GetDisk(); d != nil {
		fmt.Fprintf(w, "disk\t%s in %s\n", diskSummary(d), d.GetDataDir())
		if d.GetFull() {
			fmt.Fprintf(w, "\tFULL since %s: %s; writes are refused until space returns\n",
				time.Unix(0, d.GetFullSinceUnixNanos()).Format(time.RFC3339), d.GetReason())
		}
	}
	for _, r := range st.GetRanges() {
		d := r.GetRangeDescriptor()
		rf := r.GetRaft()
		fmt.Fprintf(w, "range %d\t%s gen %d: %s, term %d, leader node %d, commit %d, applied %d, log (%d, %d], ~%d keys, ~%d bytes\n",
			d.GetRangeId(), g.span(d), d.GetGeneration(), rf.GetState(), rf.GetTerm(), r.GetLeaderNodeId(),
			rf.GetCommitIndex(), rf.GetAppliedIndex(), rf.GetTruncatedIndex(), rf.GetLastIndex(),
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

// diskSummary is a node's disk in a few words: "FULL", or the space
// available, with the reserve.
func diskSummary(d *kvpb.NodeDisk) string {
	if d == nil || d.GetTotalBytes() == 0 {
		return "-"
	}
	state := "ok"
	if d.GetFull() {
		state = "FULL"
	}
	return fmt.Sprintf("%s %s free of %s (reserve %s)", state, mib(d.GetAvailableBytes()), mib(d.GetTotalBytes()), mib(d.GetReserveBytes()))
}

func mib(b uint64) string { return fmt.Sprintf("%.0fMiB", float64(b)/(1<<20)) }
