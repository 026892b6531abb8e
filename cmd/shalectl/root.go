package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/shaledb/shale/client"
	"github.com/spf13/cobra"
)

// errNotFound makes `get` of a missing key exit 1 after saying so.
var errNotFound = errors.New("not found")

// dialTimeout bounds the wait for a first connection.
const dialTimeout = 3 * time.Second

// defaultEndpoints are the three nodes of `make run`.
const defaultEndpoints = "127.0.0.1:7379,127.0.0.1:7381,127.0.0.1:7383"

// globals holds the flags every command shares (root persistent flags).
type globals struct {
	endpoints string
	timeout   time.Duration
	hex       bool
	json      bool
	noMux     bool
	security  securityFlags // security.go
	// attemptTimeout, when set by a command, replaces the client's
	// per-attempt timeout (long-running calls such as a range export).
	attemptTimeout time.Duration
}

// commandFactories are the top-level commands, added by register.
var commandFactories []func(*globals) *cobra.Command

// register adds top-level commands to shalectl. Call it from an init()
// in the file that defines them:
//
//	func init() { register(newRangeCmd) }
//
// Each constructor gets the shared globals; it reads g.json for --json and
// calls g.connect to reach the cluster.
func register(fs ...func(*globals) *cobra.Command) {
	commandFactories = append(commandFactories, fs...)
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "shalectl",
		Short: "shalectl talks to a Shale cluster",
		Long: `shalectl talks to a Shale cluster through its gRPC endpoints.

Every command takes --endpoints (default $SHALE_ENDPOINTS, else the three
nodes of "make run"), --timeout and --json (machine-readable output).

Binary data: keys and values on the command line are text, or hex with
--hex (every key, value and span bound, in every command's input and
output). A value can come from stdin ("put KEY -") or a file ("put KEY
--file F"), byte for byte, and "get --raw KEY" writes a value's bytes
alone. Text output shows printable UTF-8 as it is and other bytes
Go-quoted.

--json: one layout for every command. Numbers are JSON numbers; a byte
string such as a key appears as "key" when it is printable UTF-8, else as
"keyBase64" (standard base64), and with --hex always as "keyHex"; enums
are lower-case words ("live", "voter").`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	eps := os.Getenv("SHALE_ENDPOINTS")
	if eps == "" {
		eps = defaultEndpoints
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.endpoints, "endpoints", eps, "comma-separated gRPC addresses of cluster nodes (env SHALE_ENDPOINTS)")
	pf.DurationVar(&g.timeout, "timeout", 10*time.Second, "deadline for the whole command")
	pf.BoolVar(&g.hex, "hex", false, "keys and values (and span bounds) on the command line and in every output are hex-encoded")
	pf.BoolVar(&g.json, "json", false, "print JSON instead of text")
	pf.BoolVar(&g.noMux, "no-multiplex", false, "send each request as its own gRPC call, not over the connection's multiplexed stream")
	g.security.register(pf)
	var cmds []*cobra.Command
	for _, f := range commandFactories {
		cmds = append(cmds, f(g))
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name() < cmds[j].Name() })
	root.AddCommand(cmds...)
	return root
}

// endpointList is --endpoints split and trimmed.
func (g *globals) endpointList() []string {
	var eps []string
	for _, e := range strings.Split(g.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	return eps
}

// connect dials the endpoints within the command's deadline. The returned
// cancel releases the context and closes the client. A failure names the
// endpoints tried.
func (g *globals) connect(cmd *cobra.Command) (context.Context, *client.Client, func(), error) {
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	eps := g.endpointList()
	if len(eps) == 0 {
		cancel()
		return nil, nil, nil, errors.New("--endpoints is empty")
	}
	// An unreachable cluster should be reported in seconds, not at the end
	// of a long --timeout.
	dialCtx, dialCancel := context.WithTimeout(ctx, min(g.timeout, dialTimeout))
	defer dialCancel()
	opts, err := g.security.options(client.Options{RequestTimeout: g.timeout, DisableMultiplexing: g.noMux, AttemptTimeout: g.attemptTimeout})
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	c, err := client.Dial(dialCtx, eps, &opts)
	if err != nil {
		cancel()
		return nil, nil, nil, g.withEndpoints(err)
	}
	return ctx, c, func() { c.Close(); cancel() }, nil
}

// withEndpoints makes sure err tells the operator where shalectl looked:
// client errors name the endpoint that answered; others get the list.
func (g *globals) withEndpoints(err error) error {
	if err == nil {
		return nil
	}
	var ce *client.Error
	if errors.As(err, &ce) && ce.Endpoint != "" {
		return err
	}
	return fmt.Errorf("%w (endpoints tried: %s)", err, strings.Join(g.endpointList(), ","))
}
