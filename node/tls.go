package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/shaledb/shale/internal/certs"
)

// TLSFiles names the PEM files of a node's TLS identity. All three empty
// is insecure mode (plaintext, no authentication); otherwise all three are
// required.
type TLSFiles struct {
	// CAFile holds the cluster CA certificate(s). During a CA rotation it
	// holds the old and the new CA, and both are trusted.
	CAFile string
	// CertFile and KeyFile are the node's certificate (made by shalectl
	// certs create-node: OU shale-node, SANs for every address it is
	// reached at) and its private key.
	CertFile string
	KeyFile  string
}

// Enabled reports whether TLS is configured.
func (f TLSFiles) Enabled() bool { return f != TLSFiles{} }

func (f TLSFiles) validate() error {
	if f.Enabled() && (f.CAFile == "" || f.CertFile == "" || f.KeyFile == "") {
		return errors.New("node: TLS needs the CA, the certificate and the key files (all three)")
	}
	return nil
}

// tlsMaterial is one loaded generation of the node's TLS files.
type tlsMaterial struct {
	cert *tls.Certificate
	pool *x509.CertPool
}

// reloadCheckInterval bounds how often a handshake looks at the files'
// modification times: rotation takes effect within a second without a
// stat per connection.
const reloadCheckInterval = time.Second

// tlsReloader serves the node's current TLS material, re-reading the files
// when they change (checked at handshakes, at most once per
// reloadCheckInterval) or when Reload is called (on SIGHUP). A failed
// reload keeps the previous material and logs why, so a half-copied
// certificate never takes a node off the network. Safe for concurrent use.
type tlsReloader struct {
	files TLSFiles
	log   *slog.Logger

	mu      sync.Mutex
	cur     *tlsMaterial
	stamp   string
	checked time.Time
}

func newTLSReloader(files TLSFiles, log *slog.Logger) (*tlsReloader, error) {
	r := &tlsReloader{files: files, log: log}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload re-reads the files now. On error the previous material stays.
func (r *tlsReloader) Reload() error {
	stamp := r.fileStamp()
	m, err := loadTLSMaterial(r.files)
	if err != nil {
		return err
	}
	r.mu.Lock()
	first := r.cur == nil
	r.cur, r.stamp, r.checked = m, stamp, time.Now()
	r.mu.Unlock()
	if !first {
		leaf := m.cert.Leaf
		r.log.Info("TLS certificates reloaded", "cert", r.files.CertFile, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
	}
	return nil
}

// get returns the current material, reloading first if the files changed.
func (r *tlsReloader) get() *tlsMaterial {
	r.mu.Lock()
	due := time.Since(r.checked) >= reloadCheckInterval
	if due {
		r.checked = time.Now()
	}
	cur, stamp := r.cur, r.stamp
	r.mu.Unlock()
	if due && r.fileStamp() != stamp {
		if err := r.Reload(); err != nil {
			r.log.Error("TLS files changed but cannot be loaded; keeping the previous certificates", "err", err)
			r.mu.Lock()
			r.stamp = r.fileStamp() // do not retry every second until they change again
			r.mu.Unlock()
		} else {
			r.mu.Lock()
			cur = r.cur
			r.mu.Unlock()
		}
	}
	return cur
}

// fileStamp summarizes the files' sizes and modification times.
func (r *tlsReloader) fileStamp() string {
	s := ""
	for _, p := range []string{r.files.CAFile, r.files.CertFile, r.files.KeyFile} {
		if fi, err := os.Stat(p); err == nil {
			s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		} else {
			s += "missing;"
		}
	}
	return s
}

func loadTLSMaterial(f TLSFiles) (*tlsMaterial, error) {
	pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("node: loading the TLS certificate %s and key %s: %w", f.CertFile, f.KeyFile, err)
	}
	if role, err := certs.RoleOf(pair.Leaf); err != nil || role != certs.RoleNode {
		return nil, fmt.Errorf("node: %s is not a node certificate (make one with shalectl certs create-node): role %v, %v", f.CertFile, role, err)
	}
	caPEM, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("node: reading the TLS CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("node: %s holds no PEM certificate", f.CAFile)
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, fmt.Errorf("node: the certificate %s is not signed by the CA in %s: %w", f.CertFile, f.CAFile, err)
	}
	return &tlsMaterial{cert: &pair, pool: pool}, nil
}

// serverCredentials are the gRPC server's: TLS 1.3, the current node
// certificate, and client certificates verified against the current CA
// when given. A client without one may still authenticate with a bearer
// token; the authorizer (auth.go) refuses requests with neither.
func (r *tlsReloader) serverCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.get()
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				Certificates: []tls.Certificate{*m.cert},
				ClientCAs:    m.pool,
				ClientAuth:   tls.VerifyClientCertIfGiven,
				NextProtos:   []string{"h2"},
			}, nil
		},
	})
}

// httpServerConfig is the HTTPS server's: TLS 1.3 with the current node
// certificate; no client certificate is asked for.
func (r *tlsReloader) httpServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.get().cert, nil
		},
	}
}

// peerCredentials are for dialling other nodes: this node's certificate as
// its client identity, and a server that must present a node certificate
// signed by the current CA for the address dialled. When node is not 0
// the node dialled is known (a member's address from the descriptors),
// and a server whose certificate is bound to another node ID is refused:
// whoever answers at that address holds another node's certificate
// (docs/security.md, "Node identity"). refused, if not nil, is told of
// each such refusal.
func (r *tlsReloader) peerCredentials(node uint64, refused func(error)) credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13,
		// The standard verification would pin the CA pool of the moment
		// the connection was configured; VerifyConnection below does the
		// same checks against the pool current at each handshake.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.get().cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if err := verifyPeerNode(cs, r.get().pool); err != nil {
				return err
			}
			err := verifyPeerNodeID(cs.PeerCertificates[0], node, cs.ServerName)
			if err != nil && refused != nil {
				refused(err)
			}
			return err
		},
	})
}

// verifyPeerNode checks that the server of a connection presented a node
// certificate that chains to pool and names the host dialled.
func verifyPeerNode(cs tls.ConnectionState, pool *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: inter, DNSName: cs.ServerName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return fmt.Errorf("peer certificate: %w", err)
	}
	if role, err := certs.RoleOf(leaf); err != nil || role != certs.RoleNode {
		return fmt.Errorf("peer %q is not a node (role %v): %v", leaf.Subject.CommonName, role, err)
	}
	return nil
}

// verifyPeerNodeID checks that a verified node certificate may be node
// want's: bound to want, or unbound (a certificate made before binding
// existed binds nothing, as on the serving side). want 0 is a dial by
// address alone (joining, probing the initial members), which names no
// node to check against.
func verifyPeerNodeID(leaf *x509.Certificate, want uint64, host string) error {
	if want == 0 {
		return nil
	}
	got, bound, err := certs.NodeIDOf(leaf)
	switch {
	case err != nil:
		return fmt.Errorf("peer certificate at %s: %w", host, err)
	case bound && got != want:
		return fmt.Errorf("%w: dialled node %d at %s, but its certificate is bound to node %d",
			ErrPeerNodeMismatch, want, host, got)
	}
	return nil
}

// ErrPeerNodeMismatch is the refusal of a peer whose certificate is bound
// to another node than the one dialled.
var ErrPeerNodeMismatch = errors.New("node: refused a peer presenting another node's certificate")
