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

// withClient connects as every lease command does and runs call; an
// error from call names the endpoints tried.
func (g *globals) withClient(cmd *cobra.Command, call func(context.Context, *client.Client) error) error {
	ctx, c, done, err := g.connect(cmd)
	if err != nil {
		return err
	}
	defer done()
	return g.withEndpoints(call(ctx, c))
}

// printResult writes o with --json, else the text line format/args.
func (g *globals) printResult(cmd *cobra.Command, o object, format string, args ...any) error {
	if g.json {
		return writeJSON(cmd.OutOrStdout(), o)
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), format, args...)
	return err
}

// leaseObject is the JSON form of a lease's ID, TTL and time left.
func leaseObject(l client.LeaseInfo) object {
	return object{{"id", uint64(l.ID)}, {"ttlMs", l.TTL.Milliseconds()}, {"remainingMs", l.Remaining.Milliseconds()}}
}

// leaseIDCmd is a lease command whose one argument is a lease ID.
func leaseIDCmd(use, short string, run func(cmd *cobra.Command, id client.LeaseID) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseLeaseID(args[0])
			if err != nil {
				return err
			}
			return run(cmd, id)
		},
	}
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
			var got client.LeaseID
			if err := g.withClient(cmd, func(ctx context.Context, c *client.Client) (err error) {
				got, err = c.GrantID(ctx, client.LeaseID(id), ttl)
				return err
			}); err != nil {
				return err
			}
			return g.printResult(cmd, object{{"id", uint64(got)}, {"ttlMs", ttl.Milliseconds()}}, "lease %d granted with TTL %v\n", got, ttl)
		},
	}
	cmd.Flags().Uint64Var(&id, "id", 0, "the lease ID to use (0: the cluster picks one)")
	return cmd
}

func newLeaseKeepAliveCmd(g *globals) *cobra.Command {
	var once bool
	cmd := leaseIDCmd("keep-alive ID", "Keep a lease alive until interrupted (or renew it once with --once)", func(cmd *cobra.Command, id client.LeaseID) error {
		out := cmd.OutOrStdout()
		if once {
			var ttl time.Duration
			if err := g.withClient(cmd, func(ctx context.Context, c *client.Client) (err error) {
				ttl, err = c.KeepAliveOnce(ctx, id)
				return err
			}); err != nil {
				return err
			}
			fmt.Fprintf(out, "lease %d renewed: TTL %v\n", id, ttl)
			return nil
		}
		// Runs until interrupted: the command's --timeout bounds the
		// dial only.
		sctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		cmd.SetContext(sctx)
		err := g.withClient(cmd, func(_ context.Context, c *client.Client) error {
			acks, err := c.KeepAlive(sctx, id)
			if err != nil {
				return err
			}
			for a := range acks {
				if a.Err != nil {
					return a.Err
				}
				fmt.Fprintf(out, "lease %d renewed at %s: TTL %v\n", id, a.Sent.Format(time.RFC3339Nano), a.TTL)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if errors.Is(sctx.Err(), context.Canceled) {
			return nil // interrupted
		}
		return sctx.Err()
	})
	cmd.Flags().BoolVar(&once, "once", false, "renew once and exit")
	return cmd
}

func newLeaseRevokeCmd(g *globals) *cobra.Command {
	return leaseIDCmd("revoke ID", "End a lease and delete the keys attached to it", func(cmd *cobra.Command, id client.LeaseID) error {
		var n uint64
		if err := g.withClient(cmd, func(ctx context.Context, c *client.Client) (err error) {
			n, err = c.Revoke(ctx, id)
			return err
		}); err != nil {
			return err
		}
		return g.printResult(cmd, object{{"id", uint64(id)}, {"keysDeleted", n}}, "lease %d revoked: %d keys deleted\n", id, n)
	})
}

func newLeaseListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the live leases with their TTL and time left",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var ls []client.LeaseInfo
			if err := g.withClient(cmd, func(ctx context.Context, c *client.Client) (err error) {
				ls, err = c.Leases(ctx)
				return err
			}); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.json {
				list := []object{}
				for _, l := range ls {
					list = append(list, leaseObject(l))
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
	cmd := leaseIDCmd("ttl ID", "Show a lease's TTL, time left and (with --keys) attached keys", func(cmd *cobra.Command, id client.LeaseID) error {
		var info client.LeaseInfo
		if err := g.withClient(cmd, func(ctx context.Context, c *client.Client) (err error) {
			info, err = c.TimeToLive(ctx, id, keys)
			return err
		}); err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if g.json {
			o := leaseObject(info)
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
	})
	cmd.Flags().BoolVar(&keys, "keys", false, "list the attached keys too")
	return cmd
}
