package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/shaledb/shale/client"
)

func init() { register(newBackupCmd, newRestoreCmd) }

// backupTimeout is the deadline of backup commands when --timeout is not
// given: they run as long as the data takes.
const backupTimeout = 24 * time.Hour

// backupAttemptTimeout bounds one range export or file read.
const backupAttemptTimeout = 5 * time.Minute

// runLong connects for a backup command, with its own defaults for
// --timeout and the per-attempt timeout, and runs call with a progress
// printer on stderr; the caller's error is call's.
func (g *globals) runLong(cmd *cobra.Command, call func(context.Context, *client.Client, func(client.BackupProgress)) error) error {
	if f := cmd.Flag("timeout"); f == nil || !f.Changed {
		g.timeout = backupTimeout
	}
	g.attemptTimeout = backupAttemptTimeout
	ctx, c, done, err := g.connect(cmd)
	if err != nil {
		return err
	}
	defer done()
	pr := newProgressPrinter(g, cmd.ErrOrStderr())
	defer pr.finish()
	return call(ctx, c, pr.print)
}

const backupDirHelp = `DEST is a directory inside the nodes' backup directory: every node is
started with --backup-dir naming one directory that all of them see at
that path (the same directory on one machine, as "make run" does; a
volume shared by the node containers in Compose and Kubernetes). The
ranges' leaders write the backup's files there; shalectl itself reads
and writes no file.`

func newBackupCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Consistent online backups: create and verify",
		Long: `backup writes a consistent copy of the cluster, or of a span, at one
timestamp while writes go on ("backup create"), and checks one ("backup
verify"). "shalectl restore" writes a backup back into a cluster.

` + backupDirHelp,
	}
	cmd.AddCommand(newBackupCreateCmd(g), newBackupVerifyCmd(g))
	return cmd
}

func newBackupCreateCmd(g *globals) *cobra.Command {
	var start, end, base string
	var rate int64
	var keep time.Duration
	cmd := &cobra.Command{
		Use:   "create DEST",
		Short: "Back up the cluster (or --start/--end) at one timestamp into DEST",
		Long: `create asks each range's leader to write its part of the span, as of one
timestamp, as an SST file in DEST, then writes DEST/MANIFEST. The backup
equals a consistent scan of the span at the timestamp it reports.

--base makes an incremental backup: only the keys written or deleted since
the base backup (itself full or incremental) was taken. It must be taken
within the retention window of its base (10 minutes by default), or while
the base's protection lasts (--keep-protected): older history is
garbage-collected.

The backup's timestamp is protected while it runs (a protected timestamp,
refreshed as it goes), so a backup that takes longer than the retention
window succeeds. --keep-protected DURATION keeps that protection for
DURATION after the backup, so that an incremental backup on top of this
one can be taken later than the window allows; the manifest names it, and
"shalectl protect release ID" ends it early.

--rate throttles the export (bytes of keys and values per second) to
keep foreground latency low: each range's leader reads its range at that
rate, page by page, and shalectl waits between ranges, so the rate is the
whole backup's. The default, 4 MiB/s (4194304), is a small share of one
node's disk and CPU; --rate 0 lifts the limit (the export then competes
with foreground requests at full speed). One range must export within 5
minutes, so keep the rate above the split size per 5 minutes (about
220 KB/s at 64 MiB).

` + backupDirHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keep < 0 {
				return fmt.Errorf("--keep-protected must not be negative, got %v", keep)
			}
			if rate < 0 {
				return fmt.Errorf("--rate must not be negative (0: no limit), got %d", rate)
			}
			opts := &client.BackupOptions{Base: base, BytesPerSecond: rate, KeepProtected: keep}
			var err error
			if opts.Start, err = g.parseArg("--start", start); err != nil {
				return err
			}
			if opts.End, err = g.parseArg("--end", end); err != nil {
				return err
			}
			var m *client.BackupManifest
			err = g.runLong(cmd, func(ctx context.Context, c *client.Client, progress func(client.BackupProgress)) (err error) {
				opts.Progress = progress
				m, err = c.Backup(ctx, args[0], opts)
				return err
			})
			if err != nil {
				return g.withEndpoints(err)
			}
			return g.printManifest(cmd.OutOrStdout(), args[0], m)
		},
	}
	cmd.Flags().StringVar(&start, "start", "", "first key of the span to back up (default: the start of the key space)")
	cmd.Flags().StringVar(&end, "end", "", "end (exclusive) of the span to back up (default: the end of the key space)")
	cmd.Flags().StringVar(&base, "base", "", "directory of a backup to build on: an incremental backup of what changed since it")
	cmd.Flags().Int64Var(&rate, "rate", client.DefaultBackupBytesPerSecond, "bytes of keys and values exported per second at most (0: no limit)")
	cmd.Flags().DurationVar(&keep, "keep-protected", 0, "keep the backup's timestamp protected this long after it ends, for a later incremental backup (0: release it at the end)")
	return cmd
}

func (g *globals) printManifest(out io.Writer, dir string, m *client.BackupManifest) error {
	if g.json {
		o := object{{"backup", dir}, {"readTimestamp", m.ReadTimestamp.String()},
			{"readTime", m.ReadTimestamp.Time().Format(time.RFC3339Nano)}, {"base", m.Base}}
		g.addBytes(&o, "start", m.Start)
		g.addBytes(&o, "end", m.End)
		o = append(o, field{"files", len(m.Files)}, field{"entries", m.Entries}, field{"dataBytes", m.DataBytes}, field{"bytes", m.Bytes})
		if m.Protection != 0 {
			o = append(o, field{"protection", uint64(m.Protection)})
		}
		return writeJSON(out, o)
	}
	kind := "full"
	if m.Base != "" {
		kind = "incremental on " + m.Base
	}
	_, err := fmt.Fprintf(out, "backup %s (%s): %d keys, %d bytes of data in %d files (%d bytes), as of %s (%s)\n",
		dir, kind, m.Entries, m.DataBytes, len(m.Files), m.Bytes, m.ReadTimestamp, m.ReadTimestamp.Time().Format(time.RFC3339Nano))
	if err == nil && m.Protection != 0 {
		_, err = fmt.Fprintf(out, "history at %s kept by protection %d (shalectl protect list; release it when no incremental backup will build on this one)\n",
			m.ReadTimestamp, m.Protection)
	}
	return err
}

func newBackupVerifyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "verify DEST",
		Short: "Check a backup (and the backups it builds on): checksums and every entry",
		Long: `verify checks DEST's manifest against its checksum, every file against
the manifest's SHA-256, and reads every entry back, for DEST and every
backup it builds on. It exits 1 and lists the problems when the backup is
damaged.

` + backupDirHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r *client.BackupReport
			err := g.runLong(cmd, func(ctx context.Context, c *client.Client, progress func(client.BackupProgress)) (err error) {
				r, err = c.VerifyBackup(ctx, args[0], progress)
				return err
			})
			if err != nil {
				return g.withEndpoints(err)
			}
			out := cmd.OutOrStdout()
			if g.json {
				probs := r.Problems
				if probs == nil {
					probs = []string{}
				}
				if err := writeJSON(out, object{{"backups", r.Backups}, {"files", r.Files}, {"entries", r.Entries},
					{"ok", len(r.Problems) == 0}, {"problems", probs}}); err != nil {
					return err
				}
			} else if len(r.Problems) == 0 {
				fmt.Fprintf(out, "backup %s is sound: %d files, %d entries checked (%d backups in its chain)\n",
					args[0], r.Files, r.Entries, len(r.Backups))
			} else {
				for _, p := range r.Problems {
					fmt.Fprintln(out, p)
				}
			}
			if len(r.Problems) > 0 {
				return fmt.Errorf("backup %s is damaged: %d problems", args[0], len(r.Problems))
			}
			return nil
		},
	}
}

func newRestoreCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "restore DEST",
		Short: "Write a backup into the cluster (a fresh cluster or an empty span)",
		Long: `restore verifies the backup in DEST (refusing a damaged one before
writing anything), checks that its span is empty, and writes the keys back
through ordinary writes: the cluster may have any number of nodes and
ranges. For an incremental backup it restores the chain from the full
backup up. A restore that fails part-way leaves the span partly written:
delete the span and restore again.

` + backupDirHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var m *client.BackupManifest
			err := g.runLong(cmd, func(ctx context.Context, c *client.Client, progress func(client.BackupProgress)) (err error) {
				m, err = c.Restore(ctx, args[0], &client.RestoreOptions{Progress: progress})
				return err
			})
			if err != nil {
				if errors.Is(err, client.ErrBackupCorrupt) {
					return fmt.Errorf("%v (run \"shalectl backup verify %s\" for every problem)", err, args[0])
				}
				return g.withEndpoints(err)
			}
			out := cmd.OutOrStdout()
			if g.json {
				return writeJSON(out, object{{"restored", args[0]}, {"readTimestamp", m.ReadTimestamp.String()}, {"entries", m.Entries}})
			}
			_, err = fmt.Fprintf(out, "restored %s: the span as of %s\n", args[0], m.ReadTimestamp)
			return err
		},
	}
}

// progressPrinter shows progress on stderr: one updating line on a
// terminal, a JSON object per step with --json, nothing otherwise.
type progressPrinter struct {
	g     *globals
	w     io.Writer
	tty   bool
	shown bool
}

func newProgressPrinter(g *globals, w io.Writer) *progressPrinter {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progressPrinter{g: g, w: w, tty: tty}
}

func (p *progressPrinter) print(pr client.BackupProgress) {
	switch {
	case p.g.json:
		_ = writeJSON(p.w, object{{"phase", pr.Phase}, {"files", pr.Files}, {"filesTotal", pr.FilesTotal},
			{"bytes", pr.Bytes}, {"bytesTotal", pr.BytesTotal}, {"entries", pr.Entries},
			{"elapsedSeconds", pr.Elapsed.Seconds()}, {"bytesPerSecond", pr.Rate}, {"etaSeconds", pr.ETA.Seconds()}})
	case p.tty:
		eta := "?"
		if pr.ETA > 0 {
			eta = pr.ETA.Round(time.Second).String()
		}
		fmt.Fprintf(p.w, "\r%s: %d/%d files, %s of %s, %s/s, ETA %s   ", pr.Phase, pr.Files, pr.FilesTotal,
			humanBytes(pr.Bytes), humanBytes(pr.BytesTotal), humanBytes(uint64(pr.Rate)), eta)
		p.shown = true
	}
}

func (p *progressPrinter) finish() {
	if p.shown {
		fmt.Fprintln(p.w)
	}
}

func humanBytes(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}
