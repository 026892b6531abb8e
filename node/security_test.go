package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/internal/certs"
)

// testPKI is a cluster CA with a node certificate for 127.0.0.1 and one
// client certificate per role, plus a rogue CA (as a self-signed
// attacker's) with a node and an admin certificate of its own.
type testPKI struct {
	dir, rogue string
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), rogue: t.TempDir()}
	for _, d := range []string{p.dir, p.rogue} {
		must(t, certs.CreateCA(d, "", 0))
		must(t, certs.CreateNode(d, d, []string{"127.0.0.1", "localhost"}, 0, 0))
		must(t, certs.CreateClient(d, d, "admin", certs.RoleAdmin, 0))
	}
	must(t, certs.CreateClient(p.dir, p.dir, "reader", certs.RoleReadOnly, 0))
	must(t, certs.CreateClient(p.dir, p.dir, "writer", certs.RoleReadWrite, 0))
	return p
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (p *testPKI) files() TLSFiles {
	return TLSFiles{
		CAFile:   filepath.Join(p.dir, certs.CACertFile),
		CertFile: filepath.Join(p.dir, certs.NodeCertFile),
		KeyFile:  filepath.Join(p.dir, certs.NodeKeyFile),
	}
}

// tlsConfig trusts caDir's CA and presents certName/keyName from caDir
// (none when certName is empty).
func tlsConfig(t testing.TB, caDir, certName, keyName string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(caDir, certs.CACertFile))
	must(t, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if certName != "" {
		pair, err := tls.LoadX509KeyPair(filepath.Join(caDir, certName), filepath.Join(caDir, keyName))
		must(t, err)
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

func (p *testPKI) client(t testing.TB, user string) *tls.Config {
	return tlsConfig(t, p.dir, certs.ClientCertFile(user), certs.ClientKeyFile(user))
}

// addr is the node's gRPC address (the listener's, known before Serve
// publishes it).
func (tn *testNode) addr() string { return strings.TrimPrefix(tn.cc.Target(), "passthrough:///") }

// dialTLS connects to tn with cfg (plaintext when cfg is nil).
func dialTLS(t *testing.T, tn *testNode, cfg *tls.Config, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	cc, err := grpc.NewClient("passthrough:///"+tn.addr(), append(opts, grpc.WithTransportCredentials(creds))...)
	must(t, err)
	t.Cleanup(func() { cc.Close() })
	return cc
}

func startSecureNode(t *testing.T, p *testPKI, tokenFile string) *testNode {
	t.Helper()
	return startNode(t, "", Config{Security: SecurityConfig{TLS: p.files(), TokenFile: tokenFile}})
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: got %v, want code %v", what, err, code)
	}
}

func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestRolesAreEnforced: every role can do what it should and nothing
// more, and a refused write leaves nothing behind.
func TestRolesAreEnforced(t *testing.T) {
	p := newTestPKI(t)
	tn := startSecureNode(t, p, "")
	type conns struct {
		kv    kvpb.KVClient
		admin kvpb.AdminClient
	}
	as := func(user string) conns {
		var cfg *tls.Config
		if user == "" {
			cfg = tlsConfig(t, p.dir, "", "")
		} else {
			cfg = p.client(t, user)
		}
		cc := dialTLS(t, tn, cfg)
		return conns{kvpb.NewKVClient(cc), kvpb.NewAdminClient(cc)}
	}
	anon, reader, writer, admin := as(""), as("reader"), as("writer"), as("admin")

	_, err := anon.kv.Get(shortCtx(t), &kvpb.GetRequest{Key: []byte("k")})
	wantCode(t, "Get without a certificate", err, codes.Unauthenticated)
	_, err = anon.kv.Put(shortCtx(t), &kvpb.PutRequest{Key: []byte("anon"), Value: []byte("v")})
	wantCode(t, "Put without a certificate", err, codes.Unauthenticated)

	_, err = reader.kv.Put(shortCtx(t), &kvpb.PutRequest{Key: []byte("ro"), Value: []byte("v")})
	wantCode(t, "read-only Put", err, codes.PermissionDenied)
	if err != nil && !strings.Contains(err.Error(), "needs role read-write") {
		t.Errorf("read-only Put error does not name the role needed: %v", err)
	}
	_, err = reader.kv.Batch(shortCtx(t), &kvpb.BatchRequest{Mutations: []*kvpb.Mutation{putOp([]byte("ro2"), nil)}})
	wantCode(t, "read-only Batch", err, codes.PermissionDenied)

	if _, err := writer.kv.Put(shortCtx(t), &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatalf("read-write Put: %v", err)
	}
	resp, err := reader.kv.Get(shortCtx(t), &kvpb.GetRequest{Key: []byte("k")})
	if err != nil || string(resp.GetValue()) != "v" {
		t.Fatalf("read-only Get = %v, %v", resp, err)
	}
	for _, k := range []string{"anon", "ro", "ro2"} {
		if r, err := admin.kv.Get(shortCtx(t), &kvpb.GetRequest{Key: []byte(k)}); err != nil || r.GetFound() {
			t.Errorf("refused write of %q left a value: %v, %v", k, r, err)
		}
	}
	if _, err := reader.admin.Status(shortCtx(t), &kvpb.StatusRequest{}); err != nil {
		t.Errorf("read-only Status: %v", err)
	}

	// Membership and operator requests need admin.
	for name, c := range map[string]conns{"read-only": reader, "read-write": writer} {
		_, err = c.admin.AddNode(shortCtx(t), &kvpb.AddNodeRequest{Node: &kvpb.NodeDescriptor{Address: "127.0.0.1:1"}})
		wantCode(t, name+" AddNode", err, codes.PermissionDenied)
		_, err = c.admin.RemoveNode(shortCtx(t), &kvpb.RemoveNodeRequest{NodeId: 1})
		wantCode(t, name+" RemoveNode", err, codes.PermissionDenied)
		_, err = c.admin.ChangeReplicas(shortCtx(t), &kvpb.ChangeReplicasRequest{RangeId: 1})
		wantCode(t, name+" ChangeReplicas", err, codes.PermissionDenied)
		_, err = c.admin.Compact(shortCtx(t), &kvpb.CompactRequest{})
		wantCode(t, name+" Compact", err, codes.PermissionDenied)
	}
	if _, err := admin.admin.Compact(shortCtx(t), &kvpb.CompactRequest{}); err != nil {
		t.Errorf("admin Compact: %v", err)
	}
	nodes, err := admin.admin.Nodes(shortCtx(t), &kvpb.NodesRequest{})
	if err != nil || len(nodes.GetNodes()) != 1 {
		t.Errorf("membership after refused changes: %v, %v", nodes, err)
	}
}

// TestUntrustedConnectionsAreRefused: plaintext, a client certificate of
// another CA, and a client that does not trust the node's CA all fail,
// and the node serves a trusted client afterwards.
func TestUntrustedConnectionsAreRefused(t *testing.T) {
	p := newTestPKI(t)
	tn := startSecureNode(t, p, "")

	plain := kvpb.NewKVClient(dialTLS(t, tn, nil))
	_, err := plain.Get(shortCtx(t), &kvpb.GetRequest{Key: []byte("k")})
	wantCode(t, "plaintext Get", err, codes.Unavailable)

	// Trusts the right CA, presents a certificate of the rogue CA: the
	// handshake fails (the server verifies client certificates given).
	wrong := tlsConfig(t, p.rogue, certs.ClientCertFile("admin"), certs.ClientKeyFile("admin"))
	pem, _ := os.ReadFile(filepath.Join(p.dir, certs.CACertFile))
	wrong.RootCAs.AppendCertsFromPEM(pem)
	_, err = kvpb.NewKVClient(dialTLS(t, tn, wrong)).Put(shortCtx(t), &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	wantCode(t, "Put with a wrongly-signed certificate", err, codes.Unavailable)

	// Does not trust the node's CA: the client refuses the node.
	_, err = kvpb.NewKVClient(dialTLS(t, tn, tlsConfig(t, p.rogue, certs.ClientCertFile("admin"), certs.ClientKeyFile("admin")))).
		Get(shortCtx(t), &kvpb.GetRequest{Key: []byte("k")})
	wantCode(t, "Get from a client that does not trust the node", err, codes.Unavailable)

	// TLS 1.2 is refused: the node speaks TLS 1.3 only.
	old := p.client(t, "admin")
	old.MaxVersion = tls.VersionTLS12
	_, err = kvpb.NewKVClient(dialTLS(t, tn, old)).Get(shortCtx(t), &kvpb.GetRequest{Key: []byte("k")})
	wantCode(t, "Get over TLS 1.2", err, codes.Unavailable)

	if _, err := kvpb.NewKVClient(dialTLS(t, tn, p.client(t, "writer"))).Put(shortCtx(t), &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatalf("trusted Put after the refusals: %v", err)
	}
}

// TestRaftTransportNeedsANodeCertificate: an admin client certificate
// cannot open the Raft transport, and a node certificate of another CA
// cannot even connect.
func TestRaftTransportNeedsANodeCertificate(t *testing.T) {
	p := newTestPKI(t)
	tn := startSecureNode(t, p, "")
	rs, _ := tn.n.store.Replica(1)
	for deadline := time.Now().Add(10 * time.Second); rs.Status().State != "leader"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader after 10s")
		}
	}
	before := rs.Status().Term

	batch := &raftrpcpb.RaftMessageBatch{FromNodeId: 9, ToNodeId: tn.n.NodeID(), ClusterId: tn.n.ClusterID()}
	messages := func(cfg *tls.Config) error {
		s, err := raftrpcpb.NewRaftTransportClient(dialTLS(t, tn, cfg)).RaftMessages(shortCtx(t))
		if err != nil {
			return err
		}
		_ = s.Send(batch) // the answer comes on the receive side
		_, err = s.Recv()
		return err
	}
	snapshot := func(cfg *tls.Config) error {
		s, err := raftrpcpb.NewRaftTransportClient(dialTLS(t, tn, cfg)).Snapshot(shortCtx(t))
		if err != nil {
			return err
		}
		_ = s.Send(&raftrpcpb.SnapshotChunk{})
		_, err = s.CloseAndRecv()
		return err
	}
	rogue := tlsConfig(t, p.rogue, certs.NodeCertFile, certs.NodeKeyFile)
	pem, _ := os.ReadFile(filepath.Join(p.dir, certs.CACertFile))
	rogue.RootCAs.AppendCertsFromPEM(pem)
	for _, f := range []struct {
		name string
		call func(*tls.Config) error
	}{{"RaftMessages", messages}, {"Snapshot", snapshot}} {
		wantCode(t, f.name+" with an admin client certificate", f.call(p.client(t, "admin")), codes.PermissionDenied)
		wantCode(t, f.name+" without a certificate", f.call(tlsConfig(t, p.dir, "", "")), codes.Unauthenticated)
		wantCode(t, f.name+" with a rogue node certificate", f.call(rogue), codes.Unavailable)
	}
	if after := rs.Status().Term; after != before {
		t.Errorf("term changed from %d to %d", before, after)
	}
}

// TestBearerTokens: tokens give their roles over TLS without a client
// certificate; an unknown token is refused; a rewritten token file takes
// effect without a restart.
func TestBearerTokens(t *testing.T) {
	p := newTestPKI(t)
	tokFile := filepath.Join(t.TempDir(), "tokens")
	const (
		roTok  = "ro-0123456789abcdefghijklmnop"
		rwTok  = "rw-0123456789abcdefghijklmnop"
		newTok = "new-0123456789abcdefghijklmnop"
	)
	must(t, os.WriteFile(tokFile, []byte("# role token name\nread-only "+roTok+" dashboards\nread-write "+rwTok+"\n"), 0o600))
	tn := startSecureNode(t, p, tokFile)
	kv := kvpb.NewKVClient(dialTLS(t, tn, tlsConfig(t, p.dir, "", "")))
	with := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(shortCtx(t), "authorization", "Bearer "+tok)
	}
	put := func(tok, k string) error {
		_, err := kv.Put(with(tok), &kvpb.PutRequest{Key: []byte(k), Value: []byte("v")})
		return err
	}
	wantCode(t, "read-only token Put", put(roTok, "a"), codes.PermissionDenied)
	if err := put(rwTok, "a"); err != nil {
		t.Fatalf("read-write token Put: %v", err)
	}
	if _, err := kv.Get(with(roTok), &kvpb.GetRequest{Key: []byte("a")}); err != nil {
		t.Fatalf("read-only token Get: %v", err)
	}
	wantCode(t, "unknown token", put("nope-0123456789abcdefghijklmnop", "b"), codes.Unauthenticated)
	wantCode(t, "malformed header", func() error {
		_, err := kv.Get(metadata.AppendToOutgoingContext(shortCtx(t), "authorization", "Basic abc"), &kvpb.GetRequest{Key: []byte("a")})
		return err
	}(), codes.Unauthenticated)
	// A wrong token is refused even with a valid admin certificate.
	adminKV := kvpb.NewKVClient(dialTLS(t, tn, p.client(t, "admin")))
	_, err := adminKV.Put(metadata.AppendToOutgoingContext(shortCtx(t), "authorization", "Bearer wrong-0123456789abcdefghijklmnop"),
		&kvpb.PutRequest{Key: []byte("c"), Value: []byte("v")})
	wantCode(t, "admin certificate with a wrong token", err, codes.Unauthenticated)

	// Rotation: revoke the read-write token, add a new one. A broken file
	// first: the old tokens stay.
	must(t, os.WriteFile(tokFile, []byte("superuser short\n"), 0o600))
	time.Sleep(1100 * time.Millisecond)
	if err := put(rwTok, "d"); err != nil {
		t.Fatalf("a broken token file replaced the tokens: %v", err)
	}
	must(t, os.WriteFile(tokFile, []byte("read-write "+newTok+" rotated\n"), 0o600))
	deadline := time.Now().Add(5 * time.Second)
	for put(newTok, "e") != nil {
		if time.Now().After(deadline) {
			t.Fatal("new token not accepted 5s after the file changed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantCode(t, "revoked token", put(rwTok, "f"), codes.Unauthenticated)
}

// TestCertificateRotation: new node certificate files are served to new
// connections without a restart (here through ReloadCredentials, as on
// SIGHUP), and a client that trusts only the new CA connects once the
// node's CA bundle holds both.
func TestCertificateRotation(t *testing.T) {
	p := newTestPKI(t)
	tn := startSecureNode(t, p, "")
	serial := func(cfg *tls.Config) string {
		var got string
		cfg = cfg.Clone()
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			got = cs.PeerCertificates[0].SerialNumber.String()
			return nil
		}
		if _, err := kvpb.NewKVClient(dialTLS(t, tn, cfg)).Get(shortCtx(t), &kvpb.GetRequest{Key: []byte("k")}); err != nil {
			t.Fatalf("Get: %v", err)
		}
		return got
	}
	before := serial(p.client(t, "reader"))

	// A new CA; the node's files become: CA bundle old+new, a node
	// certificate of the new CA.
	next := t.TempDir()
	must(t, certs.CreateCA(next, "next CA", 0))
	must(t, certs.CreateNode(next, next, []string{"127.0.0.1"}, 0, 0))
	must(t, certs.CreateClient(next, next, "reader", certs.RoleReadOnly, 0))
	oldCA, _ := os.ReadFile(filepath.Join(p.dir, certs.CACertFile))
	newCA, _ := os.ReadFile(filepath.Join(next, certs.CACertFile))
	f := p.files()
	must(t, os.WriteFile(f.CAFile, append(append([]byte{}, oldCA...), newCA...), 0o644))
	for _, name := range []string{certs.NodeCertFile, certs.NodeKeyFile} {
		b, _ := os.ReadFile(filepath.Join(next, name))
		must(t, os.WriteFile(filepath.Join(p.dir, name), b, 0o600))
	}
	if err := tn.n.ReloadCredentials(); err != nil {
		t.Fatal(err)
	}
	// A client of either CA works: the node trusts both.
	both := p.client(t, "reader")
	both.RootCAs.AppendCertsFromPEM(newCA)
	if after := serial(both); after == before {
		t.Fatal("the node still serves its old certificate after a reload")
	}
	serial(tlsConfig(t, next, certs.ClientCertFile("reader"), certs.ClientKeyFile("reader")))

	// A half-written key does not take the node off the network.
	must(t, os.WriteFile(f.KeyFile, []byte("garbage"), 0o600))
	if err := tn.n.ReloadCredentials(); err == nil {
		t.Fatal("ReloadCredentials accepted a garbage key")
	}
	serial(both)
}
