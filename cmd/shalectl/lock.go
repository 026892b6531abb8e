package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/shaledb/shale/client/concurrency"
)

func init() { register(newLockCmd) }

func newLockCmd(g *globals) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "lock NAME [-- CMD ARGS...]",
		Short: "Hold a distributed lock while a command runs (or until interrupted)",
		Long: `lock acquires the lock NAME (keys under "lock/NAME/", attached to a lease
this command keeps alive with --ttl), then runs CMD with SHALE_LOCK_NAME,
SHALE_LOCK_KEY and SHALE_LOCK_TOKEN in its environment, and releases the
lock when CMD exits; its exit status is CMD's. Without CMD it prints the
lock's key and fencing token and holds the lock until interrupted.

The fencing token grows with every new holder: if this process is paused
or cut off for longer than the TTL its lease ends and another may take the
lock, so whatever the lock protects should refuse writes that carry a
token below the highest it has seen (docs/leases.md, "Locks"). If the
lease is lost while CMD runs, CMD is sent SIGTERM and lock fails.`,
		Example: "  shalectl lock backup-job -- ./nightly-backup.sh",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == "" {
				return errors.New("the lock name is empty")
			}
			argv := args[1:]
			if d := cmd.ArgsLenAtDash(); d >= 0 && d != 1 {
				return fmt.Errorf("lock NAME -- CMD: want one name before --, got %d", d)
			}
			sctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, c, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			s, err := concurrency.NewSession(sctx, c, ttl)
			if err != nil {
				return g.withEndpoints(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
				defer cancel()
				s.Close(ctx) //nolint:errcheck // the lease ends by itself otherwise
			}()
			m := concurrency.NewMutex(s, "lock/"+name)
			if err := m.Lock(sctx); err != nil {
				return g.withEndpoints(fmt.Errorf("acquiring lock %q: %w", name, err))
			}
			token := fmt.Sprintf("%d.%d", m.Token().WallTime, m.Token().Logical)
			out := cmd.OutOrStdout()
			if len(argv) == 0 {
				fmt.Fprintf(out, "lock %s held: key %s, fencing token %s\n", name, m.Key(), token)
				select {
				case <-sctx.Done():
					return nil
				case <-s.Done():
					return fmt.Errorf("lock %q lost: %v", name, s.Err())
				}
			}
			run := exec.Command(argv[0], argv[1:]...)
			run.Stdin, run.Stdout, run.Stderr = os.Stdin, out, cmd.ErrOrStderr()
			run.Env = append(os.Environ(), "SHALE_LOCK_NAME="+name, "SHALE_LOCK_KEY="+string(m.Key()), "SHALE_LOCK_TOKEN="+token)
			if err := run.Start(); err != nil {
				return fmt.Errorf("starting %s: %w", argv[0], err)
			}
			exited := make(chan error, 1)
			go func() { exited <- run.Wait() }()
			var runErr error
			select {
			case runErr = <-exited:
			case <-s.Done():
				run.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
				<-exited
				return fmt.Errorf("lock %q lost while %s ran (sent SIGTERM): %v", name, argv[0], s.Err())
			case <-sctx.Done():
				run.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
				runErr = <-exited
			}
			uctx, cancel := context.WithTimeout(context.Background(), g.timeout)
			defer cancel()
			if err := m.Unlock(uctx); err != nil {
				return g.withEndpoints(fmt.Errorf("releasing lock %q: %w", name, err))
			}
			var ee *exec.ExitError
			if errors.As(runErr, &ee) {
				return &exitCodeError{code: ee.ExitCode(), err: fmt.Errorf("%s: %w", argv[0], runErr)}
			}
			return runErr
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "the TTL of the lock's lease: how long a dead holder keeps the lock")
	return cmd
}

// exitCodeError carries the exit status of the command lock ran.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

// ExitCode is the status shalectl exits with (main.go).
func (e *exitCodeError) ExitCode() int { return e.code }
