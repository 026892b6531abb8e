package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shaledb/shale/client"
)

func init() { register(newLeaseCmd) }

func newLeaseCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lease",
		Short: "Grant, keep alive, revoke and list leases",
		Long: `A lease is a time to live that its holder renews with keep-alives; keys
put with it (shalectl put --lease ID) are deleted when it expires or is
revoked. A lease never expires before its TTL has passed since the last
acknowledged keep-alive was sent (docs/leases.md).`,
	}
	cmd.AddCommand(newLeaseGrantCmd(g), newLeaseKeepAliveCmd(g), newLeaseRevokeCmd(g), newLeaseListCmd(g), newLeaseTTLCmd(g))
	return cmd
}

func parseLeaseID(s string) (client.LeaseID, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("lease ID %q: want a number > 0", s)
	}
	return client.LeaseID(id), nil
}

func newLeaseGrantCmd(g *globals) *cobra.Command {
	var id uint64
	cmd := &cobra.Command{
		Use:   "grant TTL",
		Short: "Create a lease with a time to live (e.g. 10s) and print its ID",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ttl, err := time.ParseDuration(args[0])
			if err != nil {
				return fmt.Errorf("TTL %q: %v (e.g. 10s, 2m)", args[0], err)
			}
			if ttl < client.MinLeaseTTL || ttl > client.MaxLeaseTTL {
				return fmt.Errorf("TTL %v: a lease TTL must be between %v and %v", ttl, client.MinLeaseTTL, client.MaxLeaseTTL)
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			got, err := c.GrantID(ctx, client.LeaseID(id), ttl)
			if err != nil {
				return g.withEndpoints(err)
			}
			if g.json {
				return writeJSON(cmd.OutOrStdout(), object{{"id", uint64(got)}, {"ttlMs", ttl.Milliseconds()}})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lease %d granted with TTL %v\n", got, ttl)
			return nil
		},
	}
	cmd.Flags().Uint64Var(&id, "id", 0, "the lease ID to use (0: the cluster picks one)")
	return cmd
}

func newLeaseKeepAliveCmd(g *globals) *cobra.Command {
	var once bool
	cmd := &cobra.Command{
		Use:   "keep-alive ID",
		Short: "Keep a lease alive until interrupted (or renew it once with --once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseLeaseID(args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if once {
				ctx, c, done, err := g.connect(cmd)
				if err != nil {
					return err
				}
				defer done()
				ttl, err := c.KeepAliveOnce(ctx, id)
				if err != nil {
					return g.withEndpoints(err)
				}
				fmt.Fprintf(out, "lease %d renewed: TTL %v\n", id, ttl)
				return nil
			}
			// Runs until interrupted: the command's --timeout bounds the
			// dial only.
			sctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cmd.SetContext(sctx)
			_, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			acks, err := c.KeepAlive(sctx, id)
			if err != nil {
				return g.withEndpoints(err)
			}
			for a := range acks {
				if a.Err != nil {
					return g.withEndpoints(a.Err)
				}
				fmt.Fprintf(out, "lease %d renewed at %s: TTL %v\n", id, a.Sent.Format(time.RFC3339Nano), a.TTL)
			}
			if errors.Is(sctx.Err(), context.Canceled) {
				return nil // interrupted
			}
			return sctx.Err()
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "renew once and exit")
	return cmd
}

func newLeaseRevokeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "End a lease and delete the keys attached to it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseLeaseID(args[0])
			if err != nil {
				return err
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			n, err := c.Revoke(ctx, id)
			if err != nil {
				return g.withEndpoints(err)
			}
			if g.json {
				return writeJSON(cmd.OutOrStdout(), object{{"id", uint64(id)}, {"keysDeleted", n}})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lease %d revoked: %d keys deleted\n", id, n)
			return nil
		},
	}
}

func newLeaseListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the live leases with their TTL and time left",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			ls, err := c.Leases(ctx)
			if err != nil {
				return g.withEndpoints(err)
			}
			out := cmd.OutOrStdout()
			if g.json {
				list := []object{}
				for _, l := range ls {
					list = append(list, object{{"id", uint64(l.ID)}, {"ttlMs", l.TTL.Milliseconds()}, {"remainingMs", l.Remaining.Milliseconds()}})
				}
				return writeJSON(out, object{{"leases", list}})
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTTL\tREMAINING")
			for _, l := range ls {
				fmt.Fprintf(w, "%d\t%v\t%v\n", l.ID, l.TTL, l.Remaining.Round(time.Millisecond))
			}
			return w.Flush()
		},
	}
}

func newLeaseTTLCmd(g *globals) *cobra.Command {
	var keys bool
	cmd := &cobra.Command{
		Use:   "ttl ID",
		Short: "Show a lease's TTL, time left and (with --keys) attached keys",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseLeaseID(args[0])
			if err != nil {
				return err
			}
			ctx, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			info, err := c.TimeToLive(ctx, id, keys)
			if err != nil {
				return g.withEndpoints(err)
			}
			out := cmd.OutOrStdout()
			if g.json {
				o := object{{"id", uint64(info.ID)}, {"ttlMs", info.TTL.Milliseconds()}, {"remainingMs", info.Remaining.Milliseconds()}}
				if keys {
					ks := []string{}
					for _, k := range info.Keys {
						ks = append(ks, g.display(k))
					}
					o.add("keys", ks)
				}
				return writeJSON(out, o)
			}
			if info.Remaining < 0 {
				fmt.Fprintf(out, "lease %d: TTL %v, ended (its keys are being deleted)\n", id, info.TTL)
			} else {
				fmt.Fprintf(out, "lease %d: TTL %v, %v left\n", id, info.TTL, info.Remaining.Round(time.Millisecond))
			}
			for _, k := range info.Keys {
				fmt.Fprintln(out, g.display(k))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&keys, "keys", false, "list the attached keys too")
	return cmd
}
