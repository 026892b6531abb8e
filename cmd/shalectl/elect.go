package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/client/concurrency"
)

func init() { register(newElectCmd) }

func newElectCmd(g *globals) *cobra.Command {
	var (
		ttl    time.Duration
		listen bool
	)
	cmd := &cobra.Command{
		Use:   "elect NAME [PROPOSAL]",
		Short: "Campaign in a leader election, or follow its leaders (--listen)",
		Long: `elect campaigns in the election NAME (keys under "elect/NAME/", attached to a
lease this command keeps alive with --ttl) with PROPOSAL as its value,
blocks until elected, prints the leader's line and leads until
interrupted, then resigns. If the lease is lost meanwhile, elect fails.

With --listen it campaigns not and prints a line for the current leader
and for each new leader or value, until interrupted.

A leader's line is the key, a tab, the value, a tab, the key's create
version: it rises with every new leader, so it serves as a fencing token
(docs/leases.md, "Elections"). With --json, one JSON object per line.`,
		Example: "  shalectl elect scheduler host-a:8080\n  shalectl elect --listen scheduler",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == "" {
				return errors.New("the election name is empty")
			}
			if listen != (len(args) == 1) {
				if listen {
					return errors.New("elect --listen NAME takes no PROPOSAL")
				}
				return errors.New("elect NAME PROPOSAL: a campaign needs a PROPOSAL (or --listen to follow the leaders)")
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
			s, err := concurrency.NewSession(ctx, c, ttl)
			if err != nil {
				return g.withEndpoints(err)
			}
			defer func() {
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				s.Close(cctx) //nolint:errcheck // the lease ends by itself otherwise
			}()
			e := concurrency.NewElection(s, "elect/"+name)
			out := cmd.OutOrStdout()
			if listen {
				for l := range e.Observe(ctx) {
					if err := g.printLeader(out, l); err != nil {
						return err
					}
				}
				if sctx.Err() != nil {
					return nil // interrupted
				}
				return g.withEndpoints(fmt.Errorf("elect --listen: %w", ctx.Err()))
			}
			proposal, err := g.parseArg("proposal", args[1])
			if err != nil {
				return err
			}
			if err := e.Campaign(ctx, proposal); err != nil {
				if sctx.Err() != nil {
					return nil // interrupted while campaigning
				}
				return g.withEndpoints(fmt.Errorf("campaigning in %q: %w", name, err))
			}
			err = g.printLeader(out, concurrency.Leader{Key: e.Key(), Value: proposal, CreateVersion: e.Rev()})
			if err == nil {
				select {
				case <-ctx.Done():
				case <-s.Done():
					err = fmt.Errorf("election %q: leadership lost: %v", name, s.Err())
				}
			}
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if rerr := e.Resign(rctx); rerr != nil && err == nil {
				err = g.withEndpoints(fmt.Errorf("resigning from %q: %w", name, rerr))
			}
			return err
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "the TTL of the campaign's lease: how long a dead leader keeps leading")
	cmd.Flags().BoolVar(&listen, "listen", false, "follow the election's leaders instead of campaigning")
	return cmd
}

// printLeader writes a leader's line: key, value and create version.
func (g *globals) printLeader(w io.Writer, l concurrency.Leader) error {
	if g.json {
		o := g.entry(l.Key, l.Value, true)
		o.add("create_version", timestampJSON(l.CreateVersion))
		return writeJSON(w, o)
	}
	_, err := fmt.Fprintf(w, "%s\t%s\t%s\n", g.display(l.Key), g.display(l.Value), client.FormatTimestamp(l.CreateVersion))
	return err
}
