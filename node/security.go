package node

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaledb/shale/internal/certs"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// SecurityConfig secures a node (docs/security.md). The zero value is
// insecure mode: plaintext gRPC and no authentication, for local
// development only; the node says so loudly in its log.
type SecurityConfig struct {
	// TLS is the node's TLS identity. With it, every gRPC connection
	// (clients, peers' Raft traffic and snapshots, forwarded admin
	// requests) uses TLS 1.3; peers must present node certificates signed
	// by the cluster CA, and clients a client certificate or a bearer
	// token.
	TLS TLSFiles
	// TokenFile lists the bearer tokens clients may authenticate with
	// (see tokens.go for the format). Needs TLS: a token sent in
	// plaintext is a token given away.
	TokenFile string
}

// Insecure reports whether the configuration is insecure mode.
func (c SecurityConfig) Insecure() bool { return !c.TLS.Enabled() }

func (c SecurityConfig) validate() error {
	if err := c.TLS.validate(); err != nil {
		return err
	}
	if c.TokenFile != "" && !c.TLS.Enabled() {
		return errors.New("node: a token file needs TLS (tokens would cross the network in plaintext)")
	}
	return nil
}

// security is a node's loaded security state.
type security struct {
	tls  *tlsReloader // nil in insecure mode
	auth *authorizer
	// impersonation is shale_node_impersonation_refused_total, made here
	// rather than with the other metrics because the Raft transport may
	// dial (and refuse a peer) before those exist.
	impersonation prometheus.Counter
	// mu guards refusalLogged: when a refusal of each dialled node was
	// last logged (peerRefused).
	mu            sync.Mutex
	refusalLogged map[uint64]time.Time
}

func (n *Node) initSecurity() error {
	cfg := n.cfg.Security
	n.sec = &security{auth: &authorizer{}, impersonation: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shale_node_impersonation_refused_total",
		Help: "Peers refused for acting as another node: messages claiming a node ID other than the one the sender's certificate is bound to, and servers dialled as one node presenting a certificate bound to another.",
	})}
	if cfg.Insecure() {
		n.log.Warn("INSECURE MODE: TLS is off; every connection is plaintext and unauthenticated, " +
			"and anyone who can reach this node can read, write and reconfigure the cluster. " +
			"For local development only: see docs/security.md to secure a node.")
		return nil
	}
	r, err := newTLSReloader(cfg.TLS, n.log)
	if err != nil {
		return err
	}
	n.sec.tls = r
	n.sec.auth.enabled = true
	if cfg.TokenFile != "" {
		tf, err := newTokenFile(cfg.TokenFile, n.log)
		if err != nil {
			return err
		}
		n.sec.auth.tokens = tf
	}
	leaf := r.get().cert.Leaf
	if id, bound, err := certs.NodeIDOf(leaf); err == nil && bound && n.cfg.NodeID == 0 {
		// The certificate says who this node is: a node joining with it
		// registers as that ID, the only one its peers will accept.
		n.cfg.NodeID = id
		n.log.Info("node ID taken from the TLS certificate", "node_id", id)
	}
	n.log.Info("TLS on: TLS 1.3, mutual TLS between nodes, clients authenticate by certificate or token",
		"cert", cfg.TLS.CertFile, "subject", leaf.Subject.String(), "dns", leaf.DNSNames, "ips", leaf.IPAddresses,
		"not_after", leaf.NotAfter, "tokens", cfg.TokenFile != "")
	return nil
}

// serverCredentials are the gRPC server's transport credentials.
func (s *security) serverCredentials() grpc.ServerOption {
	if s.tls == nil {
		return grpc.Creds(insecure.NewCredentials())
	}
	return grpc.Creds(s.tls.serverCredentials())
}

// peerCredentials are the credentials this node dials node id with (Raft
// transport, snapshots, forwarded admin requests, the oracle, probes),
// refusing a server whose certificate is bound to another node; id 0 when
// only an address is known (joining, probing the initial members).
func (n *Node) peerCredentials(id uint64) credentials.TransportCredentials {
	if n.sec.tls == nil {
		return insecure.NewCredentials()
	}
	return n.sec.tls.peerCredentials(id, func(err error) { n.peerRefused(id, err) })
}

// refusalLogInterval spaces the log lines of refusals of one dialled
// node: gRPC redials within a second, and each attempt is refused again.
const refusalLogInterval = 10 * time.Second

// peerRefused counts every refusal of a server presenting another node's
// certificate when dialled as node id, and logs one per id per
// refusalLogInterval.
func (n *Node) peerRefused(id uint64, err error) {
	n.sec.impersonation.Inc()
	now := time.Now()
	n.sec.mu.Lock()
	last, seen := n.sec.refusalLogged[id]
	if !seen || now.Sub(last) >= refusalLogInterval {
		if n.sec.refusalLogged == nil {
			n.sec.refusalLogged = map[uint64]time.Time{}
		}
		n.sec.refusalLogged[id] = now
		seen = false
	}
	n.sec.mu.Unlock()
	if !seen {
		n.log.Warn("refused a peer presenting another node's certificate: it is not the node dialled", "node", id, "err", err)
	}
}

// ReloadCredentials re-reads the node's certificates and token file now
// (cmd/shale calls it on SIGHUP). Files also reload by themselves within a
// second of changing. On error the previous credentials stay in use.
func (n *Node) ReloadCredentials() error {
	var errs []error
	if n.sec.tls != nil {
		if err := n.sec.tls.Reload(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.sec.auth.tokens != nil {
		if err := n.sec.auth.tokens.Reload(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node: reloading credentials (the previous ones stay in use): %w", err)
	}
	return nil
}
