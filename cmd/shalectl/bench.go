package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/cmd/shalectl/internal/bench"
	"github.com/spf13/cobra"
)

func init() { register(newBenchCmd, newBenchCompareCmd) }

// newBenchCmd is `shalectl bench WORKLOAD`: a timed load test against the
// cluster (or, with --target etcd://..., against etcd, for comparison).
// --timeout does not apply: the run lasts --duration plus the load phase.
func newBenchCmd(g *globals) *cobra.Command {
	var (
		cfg        bench.Config
		target     string
		quiet      bool
		serverPids []int
		serverDir  string
	)
	var lines []string
	for _, n := range bench.WorkloadNames() {
		lines = append(lines, fmt.Sprintf("  %-17s %s", n, bench.Workloads[n]))
	}
	cmd := &cobra.Command{
		Use:   "bench WORKLOAD",
		Short: "Run a timed workload from many clients and report ops/s and latency percentiles",
		Long: "Run WORKLOAD from --clients concurrent clients for --duration, with a progress line\n" +
			"each second on stderr, then print a table (with --json, a JSON report) of ops/s and\n" +
			"p50/p95/p99/max latency per kind of request. Reads are linearizable unless --stale.\n\n" +
			"Workloads:\n" + strings.Join(lines, "\n") + "\n\n" +
			"--target etcd://host:port[,host:port] runs the same workload against etcd.\n\n" +
			"--server-pids (and --server-dir) add what the servers spent during the timed phase:\n" +
			"their CPU time and written bytes (from /proc), and the bytes that reached the block\n" +
			"device holding --server-dir (from /proc/diskstats, the whole device; Linux only).",
		Example: "  shalectl bench put --clients 64 --duration 10s\n" +
			"  shalectl bench get --load --clients 64 --keys 100000\n" +
			"  shalectl bench put --target etcd://127.0.0.1:2379 --clients 64",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Workload = args[0]
			t, err := bench.ParseTarget(target, g.endpointList())
			if err != nil {
				return err
			}
			if t.Shale, err = g.security.options(client.Options{DisableMultiplexing: g.noMux}); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if !quiet {
				cfg.Progress = cmd.ErrOrStderr()
			}
			if serverDir != "" && len(serverPids) == 0 {
				return fmt.Errorf("--server-dir needs --server-pids")
			}
			if len(serverPids) > 0 {
				cfg.Watch = &bench.Watch{Pids: serverPids, Dir: serverDir}
			}
			rep, err := bench.Run(ctx, t, cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.json {
				err = rep.WriteJSON(out)
			} else {
				err = rep.WriteTable(out)
			}
			if err != nil {
				return err
			}
			if n := rep.Errors(); n > 0 {
				return fmt.Errorf("bench: %d requests failed; first: %s", n, rep.FirstError)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&target, "target", "shale", "system under test: shale (--endpoints), shale://host:port[,...] or etcd://host:port[,...]")
	f.IntVar(&cfg.Clients, "clients", 16, "concurrent clients, each with one request in flight")
	f.IntVar(&cfg.Conns, "conns", 0, "connections shared by the clients (0: one per 16 clients)")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "length of the timed phase")
	f.IntVar(&cfg.KeySize, "key-size", 16, "key size in bytes")
	f.IntVar(&cfg.ValueSize, "value-size", 100, "value size in bytes")
	f.Int64Var(&cfg.Keys, "keys", 100_000, "key space: keys 0..keys-1")
	f.IntVar(&cfg.BatchSize, "batch-size", 32, "keys per multiget, entries per readseq scan (1..128)")
	f.BoolVar(&cfg.Stale, "stale", false, "stale reads from any replica (etcd: serializable) instead of linearizable")
	f.BoolVar(&cfg.Load, "load", false, "write the whole key space before the timed phase, so reads find data")
	f.IntVar(&cfg.DirFanout, "dir-fanout", 10, "dirwalk: subdirectories per directory")
	f.IntVar(&cfg.DirDepth, "dir-depth", 4, "dirwalk: levels of the tree (lookups per walk)")
	f.DurationVar(&cfg.OpTimeout, "op-timeout", 10*time.Second, "deadline of each request")
	f.Uint64Var(&cfg.Seed, "seed", 0, "random seed (0: from the clock)")
	f.BoolVar(&quiet, "quiet", false, "no progress lines")
	f.StringVar(&cfg.Label, "label", "", "name of the system in the report and in bench-compare (default: the target's kind)")
	f.IntSliceVar(&serverPids, "server-pids", nil, "server processes whose CPU time and written bytes to report for the timed phase (pid,pid,...)")
	f.StringVar(&serverDir, "server-dir", "", "a directory of the servers' data: also report the bytes written to its block device")
	return cmd
}
