package main

import (
	"bufio"
	"fmt"
	"time"

	"github.com/shaledb/shale/client"
	"github.com/spf13/cobra"
)

func init() { register(newPutCmd, newGetCmd, newDelCmd, newScanCmd) }

// printOK reports a successful write: "OK", or {"ok":true} with --json.
func (g *globals) printOK(cmd *cobra.Command) error {
	if g.json {
		return writeJSON(cmd.OutOrStdout(), map[string]bool{"ok": true})
	}
	_, err := fmt.Fprintln(cmd.OutOrStdout(), "OK")
	return err
}

// printWritten reports a successful write and its version: "OK", or
// {"ok":true,"version":{...}} with --json.
func (g *globals) printWritten(cmd *cobra.Command, v client.Timestamp) error {
	if g.json {
		return writeJSON(cmd.OutOrStdout(), object{{"ok", true}, {"version", timestampJSON(v)}})
	}
	_, err := fmt.Fprintln(cmd.OutOrStdout(), "OK")
	return err
}

// atUsage is the help of --at TS (get, scan).
const atUsage = "read as of this timestamp: wall nanoseconds[,logical] (--json's wallNanos and logical) or an RFC 3339 time[,logical] (as --versions prints, e.g. 2026-11-27T16:55:30.123456789Z,3); within the retention window"

// staleFlag adds --stale[=BOUND] to cmd: a bounded-staleness read
// (client.StaleRead), defaultStaleness when given without a bound.
func staleFlag(cmd *cobra.Command, bound *time.Duration) {
	cmd.Flags().DurationVar(bound, "stale", 0, "read from any replica at a timestamp at most this old (--stale alone: "+defaultStaleness.String()+"; give a bound as --stale=2s), possibly missing the latest writes")
	cmd.Flags().Lookup("stale").NoOptDefVal = defaultStaleness.String()
}

// defaultStaleness is --stale's bound when none is given: well above the
// closed-timestamp lag (docs/versions.md), so that followers serve.
const defaultStaleness = 10 * time.Second

// readOptions turns --at and --stale into read options.
func readOptions(at string, staleness time.Duration) ([]client.ReadOption, error) {
	var opts []client.ReadOption
	stale := staleness != 0
	if staleness < 0 {
		return nil, fmt.Errorf("--stale=%v: the bound must be positive", staleness)
	}
	if stale {
		opts = append(opts, client.StaleRead(staleness))
	}
	if at != "" {
		ts, err := client.ParseTimestamp(at)
		if err != nil {
			return nil, fmt.Errorf("--at: %w", err)
		}
		if ts.IsZero() {
			return nil, fmt.Errorf("--at %s: the zero timestamp names no point in time", at)
		}
		if stale {
			return nil, fmt.Errorf("--at and --stale do not go together: a read is either as of a timestamp or stale")
		}
		opts = append(opts, client.AtTimestamp(ts))
	}
	return opts, nil
}

func newPutCmd(g *globals) *cobra.Command {
	var src valueSource
	var lease uint64
	cmd := &cobra.Command{
		Use:   "put KEY [VALUE | -]",
		Short: "Set KEY to VALUE (durable when the command returns)",
		Long: `put sets KEY to a value given one of three ways:

  shalectl put KEY VALUE          the argument (hex with --hex)
  shalectl put KEY - < FILE       stdin, byte for byte
  shalectl put KEY --file FILE    a file, byte for byte

Stdin and --file take the bytes as they are (--hex does not apply to
them): use them for binary values and for values too long for an
argument list. To store the one-byte value "-" itself: --hex put KEY 2d.
With --lease ID the key is attached to a lease (shalectl lease) and is
deleted when the lease ends; an unknown or ended lease writes nothing.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := g.parseArg("key", args[0])
			if err != nil {
				return err
			}
			value, err := src.read(g, cmd, args[1:])
			if err != nil {
				return err
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			var opts []client.WriteOption
			if lease != 0 {
				opts = append(opts, client.WithLease(client.LeaseID(lease)))
			}
			v, err := c.PutVersioned(ctx, key, value, opts...)
			if err != nil {
				return g.withEndpoints(err)
			}
			return g.printWritten(cmd, v)
		},
	}
	cmd.Flags().StringVar(&src.file, "file", "", "read the value from this file, byte for byte")
	cmd.Flags().Uint64Var(&lease, "lease", 0, "attach the key to this lease (0: none)")
	return cmd
}

func newGetCmd(g *globals) *cobra.Command {
	var raw, versions bool
	var at string
	var stale time.Duration
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Print KEY's value (exit status 1 if the key does not exist)",
		Long: `get prints KEY's value: as text when it is printable UTF-8, else
Go-quoted; hex with --hex; with --raw the value's bytes alone, nothing
added (for binary values: shalectl get --raw KEY > FILE). --stale reads
from any replica at a timestamp at most 10s old (--stale=BOUND for
another bound), possibly missing the latest writes.

--at TS reads the value KEY had at timestamp TS ("as of"), within the
cluster's retention window (10 minutes by default). TS is wall-clock
nanoseconds since the Unix epoch with an optional ",logical" part
(1795798530123456789,3), or an RFC 3339 time with the same optional part
(2026-11-27T16:55:30.123456789Z,3). --versions adds the value's version
after a tab, in the RFC 3339 form; --json always has "version",
"createVersion" and "readTimestamp" (the timestamp the read was served
at; --at it to read the same again).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := g.parseArg("key", args[0])
			if err != nil {
				return err
			}
			if raw && versions {
				return fmt.Errorf("--raw prints the value's bytes alone: it does not go with --versions")
			}
			opts, err := readOptions(at, stale)
			if err != nil {
				return err
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			var served client.Timestamp
			opts = append(opts, client.ServedAt(&served))
			r, err := c.GetVersioned(ctx, key, opts...)
			if err != nil {
				return g.withEndpoints(err)
			}
			value, found := r.Value, r.Found
			out := cmd.OutOrStdout()
			switch {
			case g.json:
				e := g.entry(key, value, found)
				e.add("found", found)
				e.add("version", timestampJSON(r.Version))
				e.add("createVersion", timestampJSON(r.CreateVersion))
				e.add("readTimestamp", timestampJSON(served))
				if err := writeJSON(out, e); err != nil {
					return err
				}
			case found && raw:
				if _, err := out.Write(value); err != nil {
					return err
				}
			case found && versions:
				fmt.Fprintf(out, "%s\t%s\n", g.display(value), client.FormatTimestamp(r.Version))
			case found:
				fmt.Fprintln(out, g.display(value))
			}
			if !found {
				return fmt.Errorf("get %s: %w", g.display(key), errNotFound)
			}
			return nil
		},
	}
	staleFlag(cmd, &stale)
	cmd.Flags().BoolVar(&raw, "raw", false, "print the value's bytes exactly, with no newline (binary values)")
	cmd.Flags().StringVar(&at, "at", "", atUsage)
	cmd.Flags().BoolVar(&versions, "versions", false, "print the value's version after a tab")
	return cmd
}

func newDelCmd(g *globals) *cobra.Command {
	var rangeEnd string
	cmd := &cobra.Command{
		Use:     "del KEY",
		Aliases: []string{"delete"},
		Short:   "Delete KEY (or, with --range-end, every key in [KEY, END))",
		Args:    cobra.ExactArgs(1),
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
			var v client.Timestamp
			if cmd.Flags().Changed("range-end") {
				end, err := g.parseArg("--range-end", rangeEnd)
				if err != nil {
					return err
				}
				v, err = c.DeleteRangeVersioned(ctx, key, end)
			} else {
				v, err = c.DeleteVersioned(ctx, key)
			}
			if err != nil {
				return g.withEndpoints(err)
			}
			return g.printWritten(cmd, v)
		},
	}
	cmd.Flags().StringVar(&rangeEnd, "range-end", "", "delete the span [KEY, END) instead of one key (empty END: to the end of the key space)")
	return cmd
}

func newScanCmd(g *globals) *cobra.Command {
	var (
		limit    int
		reverse  bool
		keysOnly bool
		stale    time.Duration
		versions bool
		at       string
	)
	cmd := &cobra.Command{
		Use:   "scan [START [END]]",
		Short: "List keys in [START, END) in order (everything by default)",
		Long: "List the entries whose keys are in [START, END), one per line: the key, a tab, the value.\n" +
			"An empty or missing START or END is unbounded. With --json, one JSON object per line.\n" +
			"--stale[=BOUND] reads each range from any replica at one timestamp at most BOUND (10s) old,\n" +
			"possibly missing the latest writes.\n\n" +
			"Every range is read at one timestamp, so the listing is the key space at one moment.\n" +
			"--at TS lists it as of TS (the syntax is get's: nanoseconds[,logical] or RFC 3339[,logical]).\n" +
			"--versions adds each value's version as a third column; --json has \"version\" and\n" +
			"\"createVersion\" in every entry.",
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var start, end []byte
			var err error
			if len(args) > 0 {
				if start, err = g.parseArg("start", args[0]); err != nil {
					return err
				}
			}
			if len(args) > 1 {
				if end, err = g.parseArg("end", args[1]); err != nil {
					return err
				}
			}
			if limit < 0 {
				return fmt.Errorf("--limit %d is negative", limit)
			}
			ropts, err := readOptions(at, stale)
			if err != nil {
				return err
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			w := bufio.NewWriter(cmd.OutOrStdout())
			defer w.Flush()
			opts := &client.ScanOptions{Limit: limit, Reverse: reverse, KeysOnly: keysOnly}
			for kv, err := range c.Scan(ctx, start, end, opts, ropts...) {
				if err != nil {
					w.Flush()
					return g.withEndpoints(err)
				}
				switch {
				case g.json:
					e := g.entry(kv.Key, kv.Value, !keysOnly)
					e.add("version", timestampJSON(kv.Version))
					e.add("createVersion", timestampJSON(kv.CreateVersion))
					if err := writeJSON(w, e); err != nil {
						return err
					}
				case keysOnly && versions:
					fmt.Fprintf(w, "%s\t%s\n", g.display(kv.Key), client.FormatTimestamp(kv.Version))
				case keysOnly:
					fmt.Fprintln(w, g.display(kv.Key))
				case versions:
					fmt.Fprintf(w, "%s\t%s\t%s\n", g.display(kv.Key), g.display(kv.Value), client.FormatTimestamp(kv.Version))
				default:
					fmt.Fprintf(w, "%s\t%s\n", g.display(kv.Key), g.display(kv.Value))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&limit, "limit", 0, "stop after this many entries (0: no limit)")
	f.BoolVar(&reverse, "reverse", false, "descending key order")
	f.BoolVar(&keysOnly, "keys-only", false, "print keys only")
	staleFlag(cmd, &stale)
	f.StringVar(&at, "at", "", atUsage)
	f.BoolVar(&versions, "versions", false, "print each value's version after a tab")
	return cmd
}
