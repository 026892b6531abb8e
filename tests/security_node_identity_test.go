package tests

import (
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaledb/shale/internal/certs"
)

// TestBoundNodeCertificatesCluster runs a TLS cluster whose nodes each
// hold a certificate bound to their node ID (shalectl certs create-cluster
// --bind-node-ids, as deploy/docker-compose-tls.yml does): elections,
// appends, writes and a leadership transfer all pass the binding checks,
// and no node refuses a peer.
func TestBoundNodeCertificatesCluster(t *testing.T) {
	c, _ := boundCluster(t)
	cl := c.client()
	ctx := ctxFor(t, 60*time.Second)
	for i := 0; i < 20; i++ {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("k%02d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	leader, _ := c.leader(userRange, 10*time.Second)
	target := leader%3 + 1
	if err := cl.TransferLeader(ctx, userRange, target); err != nil {
		t.Fatal(err)
	}
	if err := cl.Put(ctx, []byte("after"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	for _, cn := range c.all() {
		if strings.Contains(cn.log(), "refused a peer claiming another node's ID") {
			t.Fatalf("node %d refused a peer of the cluster:\n%s", cn.id, tail(cn.log(), 20))
		}
	}
}

// boundCluster starts a 3-node TLS cluster whose node certificates are
// bound to their node IDs (made in dir by shalectl certs create-cluster
// --bind-node-ids).
func boundCluster(t *testing.T) (c *testCluster, dir string) {
	dir = filepath.Join(t.TempDir(), "certs")
	args := []string{"certs", "create-cluster", "--certs-dir", dir, "--bind-node-ids"}
	for id := 1; id <= 3; id++ {
		args = append(args, fmt.Sprintf("n%d=%s.%d", id, testNet(), ipBase+id))
	}
	if out, errOut, code := ctl(t, nil, args...); code != 0 {
		t.Fatalf("shalectl %v: exit %d\n%s%s", args, code, out, errOut)
	}
	p := &securePKI{dir: dir}
	c = newClusterWith(t, 3, &clusterCreds{tls: p.tls(t, dir, "root"), nodeArgs: func(id uint64) []string {
		nd := filepath.Join(dir, fmt.Sprintf("n%d", id))
		return []string{"--tls-ca", filepath.Join(nd, certs.CACertFile),
			"--tls-cert", filepath.Join(nd, certs.NodeCertFile), "--tls-key", filepath.Join(nd, certs.NodeKeyFile)}
	}})
	return c, dir
}

// TestStolenNodeCertificateCannotAnswerAsAnotherNode: node 2's key and a
// certificate bound to node 2 that also names node 3's address (misissued,
// or a shared name), served at node 3's address while node 3 is down:
// the other nodes, dialling node 3 (Raft, liveness probes), refuse it at
// the handshake, log why and count it, and no handshake with it
// completes, so nothing meant for node 3 reaches it.
func TestStolenNodeCertificateCannotAnswerAsAnotherNode(t *testing.T) {
	c, dir := boundCluster(t)
	cl := c.client(1, 2)
	ctx := ctxFor(t, 90*time.Second)
	for i := 0; i < 20; i++ {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("k%02d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	thief := filepath.Join(dir, "thief")
	n3 := c.node(3)
	args := []string{"certs", "create-node", "--certs-dir", dir, "--out", thief, "--node-id", "2",
		fmt.Sprintf("%s.%d", testNet(), ipBase+2), n3.ip}
	if out, errOut, code := ctl(t, nil, args...); code != 0 {
		t.Fatalf("shalectl %v: exit %d\n%s%s", args, code, out, errOut)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(thief, certs.NodeCertFile), filepath.Join(thief, certs.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	c.stop(3)
	l, err := tls.Listen("tcp", n3.grpcAddr, &tls.Config{Certificates: []tls.Certificate{pair},
		MinVersion: tls.VersionTLS13, ClientAuth: tls.RequestClientCert, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var attempts, completed atomic.Int64
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				attempts.Add(1)
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				if conn.(*tls.Conn).Handshake() == nil {
					// TLS 1.3: the server finishes before the client has
					// checked it; a read shows whether the client went on.
					if _, err := conn.Read(make([]byte, 1)); err == nil {
						completed.Add(1)
					}
				}
			}()
		}
	}()

	const refusal = "refused a peer presenting another node's certificate"
	deadline := time.Now().Add(30 * time.Second)
	for !(strings.Contains(c.node(1).log(), refusal) && strings.Contains(c.node(2).log(), refusal)) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the nodes have not refused the server at node 3's address (%d handshakes)\nnode 1:\n%s",
				attempts.Load(), tail(c.node(1).log(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range []uint64{1, 2} {
		if got := c.metric(id, "shale_node_impersonation_refused_total"); got < 1 {
			t.Fatalf("node %d: shale_node_impersonation_refused_total = %v, want at least 1", id, got)
		}
	}
	if n := completed.Load(); n != 0 {
		t.Fatalf("%d connections to the server holding node 2's certificate at node 3's address went past the handshake", n)
	}
	// The refusal costs nothing else: the two nodes still serve.
	if err := cl.Put(ctx, []byte("after"), []byte("v")); err != nil {
		t.Fatal(err)
	}
}
