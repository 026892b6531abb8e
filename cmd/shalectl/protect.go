package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shaledb/shale/client"
)

func init() { register(newProtectCmd) }

func newProtectCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "protect",
		Short: "List and release protected timestamps",
		Long: `A protected timestamp keeps the history a read at one timestamp needs, on
a span of keys, past the retention window, until it expires or is
released (docs/versions.md, "Protected timestamps"). Backups take one
while they run, and keep it with "backup create --keep-protected" for a
later incremental backup. Protected history is not garbage-collected:
release what no backup needs any more.`,
	}
	cmd.AddCommand(newProtectListCmd(g), newProtectReleaseCmd(g))
	return cmd
}

func newProtectListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the live protected timestamps",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			ps, err := c.Protections(ctx)
			if err != nil {
				return g.withEndpoints(err)
			}
			out := cmd.OutOrStdout()
			if g.json {
				list := []object{}
				for _, p := range ps {
					o := object{{"id", uint64(p.ID)}, {"timestamp", client.FormatTimestamp(p.Timestamp)}}
					g.addBytes(&o, "start", p.Start)
					g.addBytes(&o, "end", p.End)
					o = append(o, field{"expiry", p.Expiry.Format(time.RFC3339Nano)}, field{"description", p.Description})
					list = append(list, o)
				}
				return writeJSON(out, object{{"protections", list}})
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTIMESTAMP\tSPAN\tEXPIRES IN\tDESCRIPTION")
			for _, p := range ps {
				end := "<end>"
				if len(p.End) > 0 {
					end = g.display(p.End)
				}
				fmt.Fprintf(w, "%d\t%s\t[%s, %s)\t%v\t%s\n", p.ID, client.FormatTimestamp(p.Timestamp), g.display(p.Start), end,
					time.Until(p.Expiry).Round(time.Second), p.Description)
			}
			return w.Flush()
		},
	}
}

func newProtectReleaseCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "release ID",
		Short: "Release a protected timestamp: GC may then collect the history it kept",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || id == 0 {
				return fmt.Errorf("protection ID %q: want a number > 0", args[0])
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			if err := c.ReleaseProtection(ctx, client.ProtectionID(id)); err != nil {
				return g.withEndpoints(err)
			}
			if g.json {
				return writeJSON(cmd.OutOrStdout(), object{{"released", id}})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "protection %d released\n", id)
			return nil
		},
	}
}
