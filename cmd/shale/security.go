package main

import (
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/shaledb/shale/node"
)

// securityFlags are the flags of docs/security.md: TLS and tokens, request
// size limits and connection limits.
type securityFlags struct {
	tls       node.TLSFiles
	tokenFile string
	http      node.HTTPOptions
	limits    node.Limits
	conn      node.ConnLimits
	streams   *uint
}

func (s *securityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.tls.CAFile, "tls-ca", "", "cluster CA certificate(s), PEM; with --tls-cert and --tls-key turns TLS on (none of the three: insecure mode)")
	fs.StringVar(&s.tls.CertFile, "tls-cert", "", "this node's certificate (shalectl certs create-node)")
	fs.StringVar(&s.tls.KeyFile, "tls-key", "", "this node's private key")
	fs.StringVar(&s.tokenFile, "token-file", "", "bearer tokens clients may use: lines of <role> <token> [<name>] (needs TLS)")
	fs.BoolVar(&s.http.TLS, "http-tls", false, "serve --http (/healthz, /metrics, pprof) over HTTPS with the node's certificate (needs TLS)")
	fs.BoolVar(&s.http.Pprof, "pprof", false, "serve Go profiles under /debug/pprof/ on --http (off: 404)")

	s.limits = node.DefaultLimits()
	fs.IntVar(&s.limits.MaxKeySize, "max-key-size", s.limits.MaxKeySize, "largest key in bytes")
	fs.IntVar(&s.limits.MaxValueSize, "max-value-size", s.limits.MaxValueSize, "largest value in bytes")
	fs.IntVar(&s.limits.MaxBatchOps, "max-batch-ops", s.limits.MaxBatchOps, "most mutations in a Batch and keys in a BatchGet")
	fs.IntVar(&s.limits.MaxWriteBytes, "max-write-bytes", s.limits.MaxWriteBytes, "most key and value bytes in one write request (also sets the gRPC message limit, about twice this)")

	fs.IntVar(&s.conn.MaxConnections, "max-connections", 4096, "gRPC connections open at once")
	var streams uint
	fs.UintVar(&streams, "max-streams-per-conn", 256, "concurrent RPCs on one connection")
	fs.DurationVar(&s.conn.HandshakeTimeout, "handshake-timeout", 10*time.Second, "close connections that have not finished the TLS/HTTP2 handshake after this long")
	fs.DurationVar(&s.conn.MaxConnectionIdle, "idle-timeout", 15*time.Minute, "close connections with no RPC for this long")
	fs.DurationVar(&s.conn.DefaultRequestTimeout, "default-request-timeout", 30*time.Second, "deadline of requests that come without one")
	fs.IntVar(&s.conn.MaxMuxCallsPerStream, "max-mux-calls-per-stream", 512, "calls in flight on one multiplexed (KV.Multiplex) stream")
	fs.BoolVar(&s.conn.DisableMultiplex, "disable-multiplex", false, "answer KV.Multiplex with Unimplemented: clients send one unary RPC per request")
	s.streams = &streams
}

// apply sets cfg's security, limits and connection limits from the flags.
func (s *securityFlags) apply(cfg *node.Config) {
	s.conn.MaxConcurrentStreams = uint32(min(*s.streams, 1<<31))
	cfg.Security = node.SecurityConfig{TLS: s.tls, TokenFile: s.tokenFile}
	cfg.HTTP = s.http
	cfg.Limits = s.limits
	cfg.Conn = s.conn
}

// reloadOnSIGHUP re-reads the node's certificates and token file on every
// SIGHUP (they also reload by themselves within a second of changing).
func reloadOnSIGHUP(n *node.Node, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			if err := n.ReloadCredentials(); err != nil {
				log.Error("SIGHUP: reloading credentials failed", "err", err)
			} else {
				log.Info("SIGHUP: credentials reloaded")
			}
		}
	}()
}
