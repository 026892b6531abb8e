package main

import (
	"bufio"
	"fmt"

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

func newPutCmd(g *globals) *cobra.Command {
	var src valueSource
	cmd := &cobra.Command{
		Use:   "put KEY [VALUE | -]",
		Short: "Set KEY to VALUE (durable when the command returns)",
		Long: `put sets KEY to a value given one of three ways:

  shalectl put KEY VALUE          the argument (hex with --hex)
  shalectl put KEY - < FILE       stdin, byte for byte
  shalectl put KEY --file FILE    a file, byte for byte

Stdin and --file take the bytes as they are (--hex does not apply to
them): use them for binary values and for values too long for an
argument list. To store the one-byte value "-" itself: --hex put KEY 2d.`,
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
			if err := c.Put(ctx, key, value); err != nil {
				return g.withEndpoints(err)
			}
			return g.printOK(cmd)
		},
	}
	cmd.Flags().StringVar(&src.file, "file", "", "read the value from this file, byte for byte")
	return cmd
}

func newGetCmd(g *globals) *cobra.Command {
	var stale, raw bool
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Print KEY's value (exit status 1 if the key does not exist)",
		Long: `get prints KEY's value: as text when it is printable UTF-8, else
Go-quoted; hex with --hex; with --raw the value's bytes alone, nothing
added (for binary values: shalectl get --raw KEY > FILE). --stale reads
from any replica, possibly missing the latest writes.`,
		Args: cobra.ExactArgs(1),
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
			var opts []client.ReadOption
			if stale {
				opts = append(opts, client.StaleRead())
			}
			value, found, err := c.Get(ctx, key, opts...)
			if err != nil {
				return g.withEndpoints(err)
			}
			out := cmd.OutOrStdout()
			switch {
			case g.json:
				e := g.entry(key, value, found)
				e.add("found", found)
				if err := writeJSON(out, e); err != nil {
					return err
				}
			case found && raw:
				if _, err := out.Write(value); err != nil {
					return err
				}
			case found:
				fmt.Fprintln(out, g.display(value))
			}
			if !found {
				return fmt.Errorf("get %s: %w", g.display(key), errNotFound)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&stale, "stale", false, "read from any replica, possibly missing the latest writes")
	cmd.Flags().BoolVar(&raw, "raw", false, "print the value's bytes exactly, with no newline (binary values)")
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
			if cmd.Flags().Changed("range-end") {
				end, err := g.parseArg("--range-end", rangeEnd)
				if err != nil {
					return err
				}
				err = c.DeleteRange(ctx, key, end)
			} else {
				err = c.Delete(ctx, key)
			}
			if err != nil {
				return g.withEndpoints(err)
			}
			return g.printOK(cmd)
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
		stale    bool
	)
	cmd := &cobra.Command{
		Use:   "scan [START [END]]",
		Short: "List keys in [START, END) in order (everything by default)",
		Long: "List the entries whose keys are in [START, END), one per line: the key, a tab, the value.\n" +
			"An empty or missing START or END is unbounded. With --json, one JSON object per line.\n" +
			"--stale reads each range from any replica, possibly missing the latest writes.",
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
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			w := bufio.NewWriter(cmd.OutOrStdout())
			defer w.Flush()
			opts := &client.ScanOptions{Limit: limit, Reverse: reverse, KeysOnly: keysOnly, Stale: stale}
			for kv, err := range c.Scan(ctx, start, end, opts) {
				if err != nil {
					w.Flush()
					return g.withEndpoints(err)
				}
				switch {
				case g.json:
					if err := writeJSON(w, g.entry(kv.Key, kv.Value, !keysOnly)); err != nil {
						return err
					}
				case keysOnly:
					fmt.Fprintln(w, g.display(kv.Key))
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
	f.BoolVar(&stale, "stale", false, "read from any replica, possibly missing the latest writes")
	return cmd
}
