package certs

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadLeaf(t *testing.T, dir, certName, keyName string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, certName), filepath.Join(dir, keyName))
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCreateAndRoles(t *testing.T) {
	dir := t.TempDir()
	if err := CreateCA(dir, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := CreateCA(dir, "", 0); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("second CreateCA = %v, want a refusal to overwrite", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, CAKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key mode: %v %v", fi.Mode(), err)
	}
	nodeDir := filepath.Join(dir, "n1")
	if err := CreateNode(dir, nodeDir, []string{"localhost, 127.0.0.1", "n1.example"}, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := CreateClient(dir, dir, "alice", RoleReadOnly, 0); err != nil {
		t.Fatal(err)
	}
	if err := CreateClient(dir, dir, "root", RoleAdmin, 0); err != nil {
		t.Fatal(err)
	}
	if err := CreateClient(dir, dir, "bad", RoleNode, 0); err == nil {
		t.Fatal("CreateClient with the node role succeeded")
	}
	caCert, _, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)

	node := loadLeaf(t, nodeDir, NodeCertFile, NodeKeyFile)
	for _, host := range []string{"localhost", "127.0.0.1", "n1.example"} {
		if _, err := node.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("node certificate for %s: %v", host, err)
		}
	}
	if _, err := node.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.2"}); err == nil {
		t.Error("node certificate verified for an address it does not name")
	}
	if r, err := RoleOf(node); err != nil || r != RoleNode {
		t.Errorf("RoleOf(node) = %v, %v", r, err)
	}

	alice := loadLeaf(t, dir, ClientCertFile("alice"), ClientKeyFile("alice"))
	if r, err := RoleOf(alice); err != nil || r != RoleReadOnly {
		t.Errorf("RoleOf(alice) = %v, %v", r, err)
	}
	if _, err := alice.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verified as a server's")
	}
	root := loadLeaf(t, dir, ClientCertFile("root"), ClientKeyFile("root"))
	if r, err := RoleOf(root); err != nil || r != RoleAdmin {
		t.Errorf("RoleOf(root) = %v, %v", r, err)
	}

	// A certificate that claims the node OU without the node usages (as a
	// client certificate would) is no node.
	fake := *alice
	fake.Subject.OrganizationalUnit = []string{NodeOU}
	if r, err := RoleOf(&fake); err == nil || r != RoleNone {
		t.Errorf("RoleOf(client cert with node OU) = %v, %v", r, err)
	}
}

func TestParseRole(t *testing.T) {
	for in, want := range map[string]Role{"read-only": RoleReadOnly, "RW": RoleReadWrite, "admin": RoleAdmin} {
		if r, err := ParseRole(in); err != nil || r != want {
			t.Errorf("ParseRole(%q) = %v, %v", in, r, err)
		}
	}
	for _, in := range []string{"", "node", "root"} {
		if _, err := ParseRole(in); err == nil {
			t.Errorf("ParseRole(%q) succeeded", in)
		}
	}
}
