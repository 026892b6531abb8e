package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names inside a certificates directory.
const (
	CACertFile   = "ca.crt"
	CAKeyFile    = "ca.key"
	NodeCertFile = "node.crt"
	NodeKeyFile  = "node.key"
)

// ClientCertFile and ClientKeyFile name the files of client user.
func ClientCertFile(user string) string { return "client." + user + ".crt" }
func ClientKeyFile(user string) string  { return "client." + user + ".key" }

// Default validity periods: a CA outlives many rotations of the
// certificates it signs.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultCertValidity = 365 * 24 * time.Hour
)

// CreateCA writes a new cluster CA (ca.crt, and ca.key readable by the
// owner only) into dir. It refuses to overwrite an existing CA: replacing
// it would orphan every certificate it signed (see docs/security.md for
// rotating a CA).
func CreateCA(dir, commonName string, validity time.Duration) error {
	if commonName == "" {
		commonName = "Shale cluster CA"
	}
	if validity <= 0 {
		validity = DefaultCAValidity
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certs: generating the CA key: %w", err)
	}
	tmpl, err := template(commonName, validity)
	if err != nil {
		return err
	}
	tmpl.Subject.Organization = []string{"Shale"}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.MaxPathLenZero = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("certs: signing the CA certificate: %w", err)
	}
	return writePair(dir, CACertFile, CAKeyFile, der, key)
}

// CreateNode writes a node certificate and key (node.crt, node.key) into
// outDir, signed by the CA in caDir. hosts are the DNS names and IP
// addresses peers and clients reach the node at; every one becomes a
// subject alternative name, and TLS checks the address dialled against
// them. A nodeID other than 0 binds the certificate to that node
// (NodeIDURI): its holder can then act as no other node.
func CreateNode(caDir, outDir string, hosts []string, nodeID uint64, validity time.Duration) error {
	hosts = cleanHosts(hosts)
	if len(hosts) == 0 {
		return errors.New("certs: a node certificate needs at least one host name or IP address")
	}
	tmpl, err := template(hosts[0], validity)
	if err != nil {
		return err
	}
	tmpl.Subject.OrganizationalUnit = []string{NodeOU}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if nodeID != 0 {
		tmpl.URIs = append(tmpl.URIs, NodeIDURI(nodeID))
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return signLeaf(caDir, outDir, NodeCertFile, NodeKeyFile, tmpl)
}

// CreateClient writes the certificate and key of client user with role
// (client.<user>.crt and .key) into outDir, signed by the CA in caDir.
func CreateClient(caDir, outDir, user string, role Role, validity time.Duration) error {
	if user == "" || strings.ContainsAny(user, `/\ `) {
		return fmt.Errorf("certs: client name %q: want a non-empty name without slashes or spaces", user)
	}
	if role < RoleReadOnly || role > RoleAdmin {
		return fmt.Errorf("certs: a client certificate's role must be read-only, read-write or admin, not %v", role)
	}
	tmpl, err := template(user, validity)
	if err != nil {
		return err
	}
	tmpl.Subject.OrganizationalUnit = []string{RoleOUPrefix + role.String()}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return signLeaf(caDir, outDir, ClientCertFile(user), ClientKeyFile(user), tmpl)
}

func template(cn string, validity time.Duration) (*x509.Certificate, error) {
	if validity <= 0 {
		validity = DefaultCertValidity
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: generating a serial number: %w", err)
	}
	// Backdated an hour, so that hosts whose clocks lag a little accept
	// a fresh certificate.
	now := time.Now().Add(-time.Hour)
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now,
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}, nil
}

func signLeaf(caDir, outDir, certName, keyName string, tmpl *x509.Certificate) error {
	caCert, caKey, err := LoadCA(caDir)
	if err != nil {
		return err
	}
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certs: generating a key: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("certs: signing %s: %w", certName, err)
	}
	return writePair(outDir, certName, keyName, der, key)
}

// LoadCA reads the CA certificate and key from dir.
func LoadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, nil, fmt.Errorf("certs: reading the CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("certs: reading the CA key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("certs: %s holds no PEM certificate", filepath.Join(dir, CACertFile))
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: parsing the CA certificate: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, fmt.Errorf("certs: %s holds no PEM key", filepath.Join(dir, CAKeyFile))
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: parsing the CA key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, nil, fmt.Errorf("certs: %s is not a CA certificate with its signing key", dir)
	}
	return cert, signer, nil
}

// writePair writes the certificate (0644) and the key (0600) into dir,
// refusing to replace existing files.
func writePair(dir, certName, keyName string, der []byte, key *ecdsa.PrivateKey) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("certs: creating %s: %w", dir, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("certs: encoding the key: %w", err)
	}
	certPath, keyPath := filepath.Join(dir, certName), filepath.Join(dir, keyName)
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("certs: %s exists; move it away first (nothing was written)", p)
		}
	}
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	if err := writeNew(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return errors.Join(err, os.Remove(keyPath))
	}
	return nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	return nil
}

func cleanHosts(hosts []string) []string {
	var out []string
	for _, h := range hosts {
		for _, p := range strings.Split(h, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
