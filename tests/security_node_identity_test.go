package tests

import (
	"fmt"
	"path/filepath"
	"strings"
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
	dir := filepath.Join(t.TempDir(), "certs")
	args := []string{"certs", "create-cluster", "--certs-dir", dir, "--bind-node-ids"}
	for id := 1; id <= 3; id++ {
		args = append(args, fmt.Sprintf("n%d=127.0.0.%d", id, ipBase+id))
	}
	if out, errOut, code := ctl(t, nil, args...); code != 0 {
		t.Fatalf("shalectl %v: exit %d\n%s%s", args, code, out, errOut)
	}
	p := &securePKI{dir: dir}
	c := newClusterWith(t, 3, &clusterCreds{tls: p.tls(t, dir, "root"), nodeArgs: func(id uint64) []string {
		nd := filepath.Join(dir, fmt.Sprintf("n%d", id))
		return []string{"--tls-ca", filepath.Join(nd, certs.CACertFile),
			"--tls-cert", filepath.Join(nd, certs.NodeCertFile), "--tls-key", filepath.Join(nd, certs.NodeKeyFile)}
	}})
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
