// Command shalectl is Shale's command-line client: it reads and writes keys
// and reports on nodes, through the client library like any application.
//
//	shalectl put greeting hello
//	shalectl get greeting
//	shalectl scan --limit 10
//	shalectl status
//	shalectl node add 127.0.0.1:7385
//	shalectl transfer-leader 2 3
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/shaledb/shale/client"
	"github.com/spf13/cobra"
)

// errNotFound makes `get` of a missing key exit 1 after saying so.
var errNotFound = errors.New("not found")

// dialTimeout bounds the wait for a first connection.
const dialTimeout = 3 * time.Second

type globals struct {
	endpoints string
	timeout   time.Duration
	hex       bool
}

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "shalectl:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "shalectl",
		Short:         "shalectl talks to a Shale cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	defaultEndpoints := os.Getenv("SHALE_ENDPOINTS")
	if defaultEndpoints == "" {
		// The three nodes of `make run`.
		defaultEndpoints = "127.0.0.1:7379,127.0.0.1:7381,127.0.0.1:7383"
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.endpoints, "endpoints", defaultEndpoints, "comma-separated gRPC addresses of cluster nodes (env SHALE_ENDPOINTS)")
	pf.DurationVar(&g.timeout, "timeout", 10*time.Second, "deadline for the whole command")
	pf.BoolVar(&g.hex, "hex", false, "keys and values on the command line and in the output are hex-encoded")
	root.AddCommand(newPutCmd(g), newGetCmd(g), newDelCmd(g), newScanCmd(g), newStatusCmd(g),
		newNodeCmd(g), newTransferLeaderCmd(g), newBenchCmd(g), newBenchCompareCmd())
	return root
}

// connect dials the endpoints within the command's deadline. The returned
// cancel releases the context and closes the client.
func (g *globals) connect(cmd *cobra.Command) (context.Context, *client.Client, func(), error) {
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	var eps []string
	for _, e := range strings.Split(g.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		cancel()
		return nil, nil, nil, errors.New("--endpoints is empty")
	}
	// An unreachable cluster should be reported in seconds, not at the end
	// of a long --timeout.
	dialCtx, dialCancel := context.WithTimeout(ctx, min(g.timeout, dialTimeout))
	defer dialCancel()
	c, err := client.Dial(dialCtx, eps, &client.Options{RequestTimeout: g.timeout})
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, c, func() { c.Close(); cancel() }, nil
}
