package tests

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/internal/certs"
	"github.com/shaledb/shale/tests/internal/clusterharness"
)

// The security tests run a TLS cluster of real processes, with
// certificates made by shalectl certs, and attack it: clients without the
// right credentials, a rogue node with a certificate of its own CA, and
// Raft traffic from a client that is not a node.

// securePKI is the certificates of a test cluster: made by shalectl (so
// the command is tested too), one node certificate naming every address
// the harness gives nodes, and a client per role; plus a rogue CA with a
// node and an admin certificate.
type securePKI struct {
	dir, rogue string
}

func ctl(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	_, bin := binaries(t)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("shalectl %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

func newSecurePKI(t *testing.T) *securePKI {
	t.Helper()
	p := &securePKI{dir: filepath.Join(t.TempDir(), "certs"), rogue: filepath.Join(t.TempDir(), "rogue")}
	var hosts []string
	for id := 1; id <= 9; id++ {
		hosts = append(hosts, fmt.Sprintf("%s.%d", testNet(), ipBase+id))
	}
	for _, d := range []string{p.dir, p.rogue} {
		for _, args := range [][]string{
			{"certs", "create-ca", "--certs-dir", d},
			append([]string{"certs", "create-node", "--certs-dir", d, "--node-id", "0"}, hosts...), // shared by every node
			{"certs", "create-client", "--certs-dir", d, "--role", "admin", "root"},
		} {
			if out, errOut, code := ctl(t, nil, args...); code != 0 {
				t.Fatalf("shalectl %v: exit %d\n%s%s", args, code, out, errOut)
			}
		}
	}
	for user, role := range map[string]string{"reader": "read-only", "writer": "read-write"} {
		if _, errOut, code := ctl(t, nil, "certs", "create-client", "--certs-dir", p.dir, "--role", role, user); code != 0 {
			t.Fatalf("create-client %s: %s", user, errOut)
		}
	}
	return p
}

func (p *securePKI) nodeFlags(dir string) []string {
	return []string{"--tls-ca", filepath.Join(dir, certs.CACertFile),
		"--tls-cert", filepath.Join(dir, certs.NodeCertFile), "--tls-key", filepath.Join(dir, certs.NodeKeyFile)}
}

// tls returns a client TLS configuration trusting the cluster CA with
// user's certificate from dir ("" for none).
func (p *securePKI) tls(t *testing.T, dir, user string) *tls.Config {
	t.Helper()
	cert, key := "", ""
	if user != "" {
		cert, key = filepath.Join(dir, certs.ClientCertFile(user)), filepath.Join(dir, certs.ClientKeyFile(user))
	}
	cfg, err := client.LoadTLSConfig(filepath.Join(p.dir, certs.CACertFile), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (p *securePKI) env(user string) []string {
	return []string{"SHALE_CLIENT_TLS_CA=" + filepath.Join(p.dir, certs.CACertFile),
		"SHALE_CLIENT_TLS_CERT=" + filepath.Join(p.dir, certs.ClientCertFile(user)),
		"SHALE_CLIENT_TLS_KEY=" + filepath.Join(p.dir, certs.ClientKeyFile(user))}
}

func dialAs(t *testing.T, c *testCluster, cfg *tls.Config) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, c.endpoints(), &client.Options{TLS: cfg, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// raftState is every node's (term, leader) of a range.
func raftState(t *testing.T, c *testCluster, rangeID uint64) map[uint64][2]uint64 {
	t.Helper()
	out := map[uint64][2]uint64{}
	for _, cn := range c.all() {
		rs, err := c.rangeState(cn.id, rangeID)
		if err != nil {
			t.Fatalf("status of node %d: %v", cn.id, err)
		}
		out[cn.id] = [2]uint64{rs.GetRaft().GetTerm(), rs.GetRaft().GetLeaderReplicaId()}
	}
	return out
}

func TestSecureCluster(t *testing.T) {
	p := newSecurePKI(t)
	// Tokens made by shalectl, as an operator would.
	var tokens []string
	for _, role := range []string{"read-only", "read-write"} {
		line, errOut, code := ctl(t, nil, "certs", "create-token", role, "tok-"+role)
		if code != 0 {
			t.Fatalf("create-token: %s", errOut)
		}
		tokens = append(tokens, line)
	}
	tokenFile := filepath.Join(p.dir, "tokens")
	if err := os.WriteFile(tokenFile, []byte(strings.Join(tokens, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	roToken, rwToken := strings.Fields(tokens[0])[1], strings.Fields(tokens[1])[1]
	c := newClusterWith(t, 3, &clusterCreds{tls: p.tls(t, p.dir, "root")},
		append(p.nodeFlags(p.dir), "--token-file", tokenFile)...)
	for _, cn := range c.all() {
		if !strings.Contains(cn.log(), "TLS on") || strings.Contains(cn.log(), "INSECURE MODE") {
			t.Fatalf("node %d does not report TLS on:\n%s", cn.id, tail(cn.log(), 20))
		}
	}
	ctx := ctxFor(t, 60*time.Second)

	t.Run("ReplicatesOverTLS", func(t *testing.T) {
		w := dialAs(t, c, p.tls(t, p.dir, "writer"))
		if err := w.Put(ctx, []byte("k"), []byte("v")); err != nil {
			t.Fatalf("read-write Put: %v", err)
		}
		for _, cn := range c.all() {
			deadline := time.Now().Add(10 * time.Second)
			for {
				v, ok, err := c.staleGet(cn.id, "k")
				if err == nil && ok && v == "v" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node %d has not applied the write over TLS: %q %v %v", cn.id, v, ok, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	})

	t.Run("ReadOnlyCannotWrite", func(t *testing.T) {
		r := dialAs(t, c, p.tls(t, p.dir, "reader"))
		err := r.Put(ctx, []byte("ro"), []byte("v"))
		if !errors.Is(err, client.ErrPermissionDenied) {
			t.Fatalf("read-only Put = %v, want ErrPermissionDenied", err)
		}
		if v, ok, err := r.Get(ctx, []byte("k")); err != nil || !ok || string(v) != "v" {
			t.Fatalf("read-only Get = %q %v %v", v, ok, err)
		}
		if _, ok, _ := r.Get(ctx, []byte("ro")); ok {
			t.Fatal("the refused write is there")
		}
	})

	t.Run("UnauthenticatedAndWronglySignedClientsAreRejected", func(t *testing.T) {
		anon := dialAs(t, c, p.tls(t, p.dir, "")) // health checks are open
		if _, _, err := anon.Get(ctx, []byte("k")); !errors.Is(err, client.ErrPermissionDenied) {
			t.Fatalf("Get without credentials = %v", err)
		}
		wrong := p.tls(t, p.rogue, "root") // trusts the cluster, presents the rogue CA's admin
		dctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if cl, err := client.Dial(dctx, c.endpoints(), &client.Options{TLS: wrong}); err == nil {
			_, _, err = cl.Get(dctx, []byte("k"))
			cl.Close()
			t.Fatalf("a wrongly-signed client connected (Get: %v)", err)
		}
		cl, err := client.Dial(dctx, c.endpoints(), nil)
		if err == nil {
			cl.Close()
			t.Fatal("a plaintext client connected to a TLS cluster")
		}
		// The error names the likely cause, not only the transport's EOF.
		if !strings.Contains(err.Error(), "TLS") {
			t.Errorf("a plaintext client's error does not mention TLS: %v", err)
		}
	})

	t.Run("BearerTokens", func(t *testing.T) {
		env := func(tok string) []string {
			return []string{"SHALE_CLIENT_TLS_CA=" + filepath.Join(p.dir, certs.CACertFile), "SHALE_TOKEN=" + tok,
				"SHALE_ENDPOINTS=" + strings.Join(c.endpoints(), ",")}
		}
		if out, errOut, code := ctl(t, env(roToken), "put", "tok", "v"); code == 0 || !strings.Contains(errOut, "permission denied") {
			t.Errorf("put with a read-only token: exit %d\n%s%s", code, out, errOut)
		}
		if out, errOut, code := ctl(t, env(rwToken), "put", "tok", "v"); code != 0 {
			t.Errorf("put with a read-write token: exit %d\n%s%s", code, out, errOut)
		}
		if out, errOut, code := ctl(t, env(roToken), "get", "tok"); code != 0 || strings.TrimSpace(out) != "v" {
			t.Errorf("get with a read-only token: exit %d\n%s%s", code, out, errOut)
		}
		if out, errOut, code := ctl(t, env("not-a-token-0123456789abcdef"), "get", "tok"); code == 0 || !strings.Contains(errOut, "unknown bearer token") {
			t.Errorf("get with an unknown token: exit %d\n%s%s", code, out, errOut)
		}
		// shalectl bench connects with the same TLS and token settings.
		if out, errOut, code := ctl(t, env(rwToken), "bench", "put", "--clients", "2", "--duration", "1s", "--keys", "100", "--quiet"); code != 0 {
			t.Errorf("bench put with a read-write token: exit %d\n%s%s", code, out, errOut)
		}
		if out, errOut, code := ctl(t, env(roToken), "bench", "put", "--clients", "1", "--duration", "1s", "--keys", "100", "--quiet"); code == 0 || !strings.Contains(errOut, "permission denied") {
			t.Errorf("bench put with a read-only token: exit %d\n%s%s", code, out, errOut)
		}
	})

	t.Run("NonAdminCannotChangeMembership", func(t *testing.T) {
		for _, user := range []string{"reader", "writer"} {
			out, errOut, code := ctl(t, append(p.env(user), "SHALE_ENDPOINTS="+c.node(1).grpcAddr), "node", "remove", "3")
			if code == 0 || !strings.Contains(errOut, "permission denied") {
				t.Errorf("%s: shalectl node remove 3: exit %d\n%s%s", user, code, out, errOut)
			}
		}
		_, admin, done := c.raw(1)
		defer done()
		nodes, err := admin.Nodes(ctx, &kvpb.NodesRequest{})
		if err != nil || len(nodes.GetNodes()) != 3 {
			t.Fatalf("membership after refused removals: %v %v", nodes, err)
		}
		// An admin may: shalectl status with the admin's certificate.
		// It reaches every node over TLS for their replicas' state (it
		// dialled the other nodes in plaintext once, and called them all
		// unreachable).
		if out, errOut, code := ctl(t, append(p.env("root"), "SHALE_ENDPOINTS="+c.node(1).grpcAddr), "status"); code != 0 || strings.Contains(out, "unreachable") {
			t.Fatalf("admin shalectl status: exit %d\n%s%s", code, out, errOut)
		}
	})

	t.Run("NodeJoinsAndGetsSnapshotsOverTLS", func(t *testing.T) {
		n4 := c.newNode(4)
		c.start(4, "--join", c.node(1).grpcAddr)
		cl := c.client() // the admin's
		resp, err := cl.AddNode(ctx, &kvpb.NodeDescriptor{Address: n4.grpcAddr})
		if err != nil || resp.GetNodeId() != 4 {
			t.Fatalf("AddNode = %v, %v", resp, err)
		}
		for _, rangeID := range []uint64{1, 2} {
			if _, err := cl.ChangeReplicas(ctx, rangeID, &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: 4}); err != nil {
				t.Fatalf("adding node 4 to range %d: %v", rangeID, err)
			}
		}
		if got := c.metric(4, "shale_raft_snapshots_received_total"); got < 2 {
			t.Fatalf("node 4 received %v snapshots; want one per range", got)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			v, ok, err := c.staleGet(4, "k")
			if err == nil && ok && v == "v" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node 4 after its snapshot: %q %v %v", v, ok, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("RogueNodeCannotJoinOrDisturbRaft", func(t *testing.T) {
		before := raftState(t, c, 2)
		_, admin, done := c.raw(1)
		defer done()
		members, err := admin.Nodes(ctx, &kvpb.NodesRequest{})
		if err != nil {
			t.Fatal(err)
		}

		// A rogue node with its own CA tries to join through node 1. It
		// trusts the cluster's CA besides its own, so that it is the
		// cluster that must refuse it.
		shale, _ := binaries(t)
		rogueDir := t.TempDir()
		ours, _ := os.ReadFile(filepath.Join(p.dir, certs.CACertFile))
		theirs, _ := os.ReadFile(filepath.Join(p.rogue, certs.CACertFile))
		bundle := filepath.Join(rogueDir, "ca-bundle.crt")
		if err := os.WriteFile(bundle, append(theirs, ours...), 0o644); err != nil {
			t.Fatal(err)
		}
		rogueIP := fmt.Sprintf("%s.%d", testNet(), ipBase+9)
		rogueLog := filepath.Join(rogueDir, "rogue.log")
		logf, err := os.Create(rogueLog)
		if err != nil {
			t.Fatal(err)
		}
		rogueGRPC, rogueHTTP := reservePort(t, rogueIP), reservePort(t, rogueIP)
		cmd := exec.Command(shale, "--listen", rogueGRPC.Addr(), "--http", rogueHTTP.Addr(), "--data-dir", filepath.Join(rogueDir, "data"),
			"--join", c.node(1).grpcAddr, "--raft-tick", clusterTick.String(),
			"--tls-ca", bundle, "--tls-cert", filepath.Join(p.rogue, certs.NodeCertFile), "--tls-key", filepath.Join(p.rogue, certs.NodeKeyFile))
		cmd.Stdout, cmd.Stderr = logf, logf
		closeListeners, err := clusterharness.PassListeners(cmd, clusterharness.Socket{Flag: "--listen-fd", Port: rogueGRPC},
			clusterharness.Socket{Flag: "--http-fd", Port: rogueHTTP})
		if err != nil {
			t.Fatal(err)
		}
		err = cmd.Start()
		closeListeners()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() }()

		// Meanwhile the rogue CA's node certificate and the cluster's own
		// admin client certificate each try to send a high-term vote to
		// every node.
		rogue := p.tls(t, p.rogue, "")
		rogueNode, _ := tls.LoadX509KeyPair(filepath.Join(p.rogue, certs.NodeCertFile), filepath.Join(p.rogue, certs.NodeKeyFile))
		rogue.Certificates = []tls.Certificate{rogueNode}
		for _, cn := range c.all() {
			term := before[cn.id][0]
			for name, cfg := range map[string]*tls.Config{"rogue node": rogue, "admin client": p.tls(t, p.dir, "root")} {
				err := sendVote(cn.grpcAddr, cfg, c, cn.id, term+100)
				want := codes.PermissionDenied
				if name == "rogue node" {
					want = codes.Unavailable // the TLS handshake fails
				}
				if status.Code(err) != want {
					t.Errorf("%s vote to node %d: %v, want %v", name, cn.id, err, want)
				}
			}
		}

		time.Sleep(5 * time.Second) // the rogue keeps trying to join meanwhile
		nodes, err := admin.Nodes(ctx, &kvpb.NodesRequest{})
		if err != nil || len(nodes.GetNodes()) != len(members.GetNodes()) {
			t.Fatalf("members after the rogue's attempts: %v %v", nodes, err)
		}
		b, _ := os.ReadFile(rogueLog)
		if !strings.Contains(string(b), "cannot join") || !strings.Contains(string(b), "certificate") {
			t.Errorf("the rogue's log does not show a refused join:\n%s", tail(string(b), 20))
		}
		after := raftState(t, c, 2)
		for id, st := range before {
			if after[id] != st {
				t.Errorf("node %d: (term, leader) went from %v to %v", id, st, after[id])
			}
		}
		w := dialAs(t, c, p.tls(t, p.dir, "writer"))
		if err := w.Put(ctx, []byte("after-rogue"), []byte("v")); err != nil {
			t.Fatalf("Put after the attacks: %v", err)
		}
	})
}

// sendVote opens a Raft stream to node id at addr with cfg and sends a
// MsgVote for range 2 at term; it returns the stream's error.
func sendVote(addr string, cfg *tls.Config, c *testCluster, id, term uint64) error {
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := raftrpcpb.NewRaftTransportClient(cc).RaftMessages(ctx)
	if err != nil {
		return err
	}
	rs, _ := c.rangeState(id, 2)
	_ = s.Send(&raftrpcpb.RaftMessageBatch{FromNodeId: 99, ToNodeId: id, ClusterId: clusterIDOf(c),
		Messages: []*raftrpcpb.RangeMessage{{RangeId: 2, Message: &pb.Message{
			Type: pb.MsgVote.Enum(), Term: new(term), From: new(uint64(99)), To: new(rs.GetRaft().GetReplicaId()),
			LogTerm: new(term), Index: new(uint64(1 << 40)),
		}}}})
	_, err = s.Recv()
	return err
}

func clusterIDOf(c *testCluster) string {
	_, admin, done := c.raw(1)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := admin.Status(ctx, &kvpb.StatusRequest{})
	if err != nil {
		return ""
	}
	return st.GetClusterId()
}

// TestLimitsFlagsAndInsecureWarning: a node in insecure mode says so in
// its log; the size limit flags are enforced with InvalidArgument naming
// the limit, and the node keeps serving.
func TestLimitsFlagsAndInsecureWarning(t *testing.T) {
	n := startNode(t, filepath.Join(t.TempDir(), "n"), "--max-value-size", "1024", "--max-key-size", "64", "--max-write-bytes", "4096")
	if !strings.Contains(n.log(), "INSECURE MODE") {
		t.Errorf("an insecure node does not warn:\n%s", tail(n.log(), 10))
	}
	ctx := ctxFor(t, 30*time.Second)
	cl, err := client.Dial(ctx, []string{n.grpcAddr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, tc := range []struct {
		key, value []byte
		limit      string
	}{
		{[]byte("k"), bytes.Repeat([]byte("v"), 1025), "max_value_size"},
		{bytes.Repeat([]byte("k"), 65), []byte("v"), "max_key_size"},
	} {
		err := cl.Put(ctx, tc.key, tc.value)
		var ce *client.Error
		if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, &ce) || ce.Limit.GetLimit() != tc.limit {
			t.Errorf("oversized Put = %v, want InvalidArgument naming %s", err, tc.limit)
		}
	}
	if err := cl.Put(ctx, []byte("k"), bytes.Repeat([]byte("v"), 1024)); err != nil {
		t.Fatalf("Put at the limit: %v", err)
	}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestCertsCreateCluster: shalectl certs create-cluster makes a working set
// of certificates and, run again, keeps them.
func TestCertsCreateCluster(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	args := []string{"certs", "create-cluster", "--certs-dir", dir, "--extra-hosts", "127.0.0.1", "n1", "n2=10.1.2.3"}
	out, errOut, code := ctl(t, nil, args...)
	if code != 0 || strings.Count(out, "created") != 4 {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errOut)
	}
	first, _ := os.ReadFile(filepath.Join(dir, "n2", certs.NodeCertFile))
	if out, errOut, code := ctl(t, nil, args...); code != 0 || out != "" {
		t.Fatalf("second run made something or failed: exit %d\n%s%s", code, out, errOut)
	}
	again, _ := os.ReadFile(filepath.Join(dir, "n2", certs.NodeCertFile))
	if !bytes.Equal(first, again) {
		t.Fatal("a second run replaced node n2's certificate")
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "n2", certs.NodeCertFile), filepath.Join(dir, "n2", certs.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if role, err := certs.RoleOf(pair.Leaf); err != nil || role != certs.RoleNode {
		t.Fatalf("n2's certificate: role %v, %v", role, err)
	}
	if got := fmt.Sprint(pair.Leaf.DNSNames, pair.Leaf.IPAddresses); got != "[n2] [10.1.2.3 127.0.0.1]" {
		t.Fatalf("n2's names: %s", got)
	}
	if _, err := client.LoadTLSConfig(filepath.Join(dir, "n1", certs.CACertFile),
		filepath.Join(dir, certs.ClientCertFile("root")), filepath.Join(dir, certs.ClientKeyFile("root"))); err != nil {
		t.Fatalf("admin client files: %v", err)
	}
}

// TestSIGHUPReloadsCertificates: a node given new certificate files and a
// SIGHUP serves the new certificate to new connections, without a restart.
func TestSIGHUPReloadsCertificates(t *testing.T) {
	p := newSecurePKI(t)
	nodeDir := filepath.Join(t.TempDir(), "node")
	if err := os.MkdirAll(nodeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(to, b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{certs.CACertFile, certs.NodeCertFile, certs.NodeKeyFile} {
		copyFile(filepath.Join(p.dir, f), filepath.Join(nodeDir, f))
	}
	ip := fmt.Sprintf("%s.%d", testNet(), ipBase+1)
	n := startNodeOn(t, filepath.Join(t.TempDir(), "data"), reservePort(t, ip), nil, p.nodeFlags(nodeDir)...)
	serial := func() string {
		cfg := p.tls(t, p.dir, "root")
		var got string
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			got = cs.PeerCertificates[0].SerialNumber.String()
			return nil
		}
		cc, err := grpc.NewClient("passthrough:///"+n.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		if _, err := kvpb.NewAdminClient(cc).Status(ctxFor(t, 10*time.Second), &kvpb.StatusRequest{}); err != nil {
			t.Fatalf("Status: %v", err)
		}
		return got
	}
	before := serial()
	// A new certificate of the same CA, as at a routine rotation.
	next := filepath.Join(t.TempDir(), "next")
	if _, errOut, code := ctl(t, nil, "certs", "create-node", "--certs-dir", p.dir, "--node-id", "0", "--out", next, ip); code != 0 {
		t.Fatal(errOut)
	}
	copyFile(filepath.Join(next, certs.NodeCertFile), filepath.Join(nodeDir, certs.NodeCertFile))
	copyFile(filepath.Join(next, certs.NodeKeyFile), filepath.Join(nodeDir, certs.NodeKeyFile))
	if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(n.log(), "SIGHUP: credentials reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload logged 10s after SIGHUP:\n%s", tail(n.log(), 10))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after := serial(); after == before {
		t.Fatalf("the node serves its old certificate (serial %s) after SIGHUP", before)
	}
}
