package certs

import (
	"crypto/tls"
	"path/filepath"
	"testing"
)

// TestNodeCertificateBinding: --node-id N binds the certificate to N; 0
// leaves it unbound.
func TestNodeCertificateBinding(t *testing.T) {
	dir := t.TempDir()
	if err := CreateCA(dir, "", 0); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{0, 7} {
		out := filepath.Join(dir, "n")
		if id != 0 {
			out = filepath.Join(dir, "bound")
		}
		if err := CreateNode(dir, out, []string{"127.0.0.1"}, id, 0); err != nil {
			t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(filepath.Join(out, NodeCertFile), filepath.Join(out, NodeKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		got, bound, err := NodeIDOf(pair.Leaf)
		if err != nil || bound != (id != 0) || got != id {
			t.Fatalf("CreateNode(node ID %d): NodeIDOf = %d, %v, %v", id, got, bound, err)
		}
		if id != 0 && pair.Leaf.URIs[0].String() != "shale://node/7" {
			t.Fatalf("URI SAN = %s, want shale://node/7", pair.Leaf.URIs[0])
		}
	}
}
