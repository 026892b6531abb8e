package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/shaledb/shale/client"
)

func init() { register(newWatchCmd) }

// watchTimeout is watch's --timeout when none is given: it runs until
// interrupted.
const watchTimeout = 100 * 365 * 24 * time.Hour

func newWatchCmd(g *globals) *cobra.Command {
	var (
		from     string
		prev     bool
		progress bool
		limit    int
	)
	cmd := &cobra.Command{
		Use:   "watch PREFIX",
		Short: "Print the changes to the keys starting with PREFIX as they happen",
		Long: "Print one line per change to a key starting with PREFIX (an empty PREFIX: every key),\n" +
			"until interrupted: PUT or DELETE, a tab, the key, a tab, the value (empty for DELETE), a tab,\n" +
			"the version. The changes of one key come in version order; nothing is lost or repeated\n" +
			"when a node fails, a leader moves or a range splits or merges (docs/watch.md).\n\n" +
			"--from V prints every change after version V first (within the retention window;\n" +
			"older fails with \"history compacted\"); the syntax is get's --at. --prev adds each\n" +
			"key's previous value as a fifth column. --progress prints \"PROGRESS<tab>V\" lines:\n" +
			"every change at or below V has been printed. --limit N stops after N changes.\n" +
			"With --json, one JSON object per line.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix, err := g.parseArg("prefix", args[0])
			if err != nil {
				return err
			}
			if limit < 0 {
				return fmt.Errorf("--limit %d is negative", limit)
			}
			opts := &client.WatchOptions{PrevValues: prev}
			if from != "" {
				if opts.From, err = client.ParseTimestamp(from); err != nil {
					return fmt.Errorf("--from: %w", err)
				}
				if opts.From.IsZero() {
					return fmt.Errorf("--from %s: the zero version names no point in time", from)
				}
			}
			if f := cmd.Flag("timeout"); f == nil || !f.Changed {
				g.timeout = watchTimeout
			}
			sctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cmd.SetContext(sctx)
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			ch, err := c.Watch(ctx, prefix, client.PrefixEnd(prefix), opts)
			if err != nil {
				return g.withEndpoints(err)
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			defer w.Flush()
			n := 0
			for resp := range ch {
				if resp.Err != nil {
					w.Flush()
					if sctx.Err() != nil || (limit > 0 && n >= limit) {
						return nil // interrupted, or done
					}
					if errors.Is(resp.Err, context.DeadlineExceeded) {
						return fmt.Errorf("watch: --timeout %v reached", g.timeout)
					}
					return g.withEndpoints(resp.Err)
				}
				for _, e := range resp.Events {
					if err := g.printWatchEvent(w, e, prev); err != nil {
						return err
					}
					if n++; limit > 0 && n >= limit {
						return nil
					}
				}
				if progress && !resp.Progress.IsZero() {
					if g.json {
						err = writeJSON(w, object{{"progress", timestampJSON(resp.Progress)}})
					} else {
						_, err = fmt.Fprintf(w, "PROGRESS\t%s\n", client.FormatTimestamp(resp.Progress))
					}
					if err != nil {
						return err
					}
				}
				// A line as soon as it happens, not when a buffer fills.
				if len(ch) == 0 {
					if err := w.Flush(); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "print every change after this version first: "+atUsage)
	f.BoolVar(&prev, "prev", false, "print each key's previous value after the version")
	f.BoolVar(&progress, "progress", false, "print progress notices (PROGRESS, a tab, the version)")
	f.IntVar(&limit, "limit", 0, "stop after this many changes (0: no limit)")
	return cmd
}

// printWatchEvent prints one event: a line of tab-separated columns, or a
// JSON object with --json.
func (g *globals) printWatchEvent(w *bufio.Writer, e client.WatchEvent, prev bool) error {
	if g.json {
		o := object{{"type", e.Type.String()}}
		g.addBytes(&o, "key", e.Key)
		if e.Type == client.WatchPut {
			g.addBytes(&o, "value", e.Value)
		}
		o.add("version", timestampJSON(e.Version))
		if prev && e.PrevFound {
			g.addBytes(&o, "prevValue", e.PrevValue)
		}
		return writeJSON(w, o)
	}
	line := fmt.Sprintf("%s\t%s\t%s\t%s", e.Type, g.display(e.Key), g.display(e.Value), client.FormatTimestamp(e.Version))
	if prev {
		pv := ""
		if e.PrevFound {
			pv = g.display(e.PrevValue)
		}
		line += "\t" + pv
	}
	_, err := fmt.Fprintln(w, line)
	return err
}
