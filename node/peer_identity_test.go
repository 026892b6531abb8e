package node

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/internal/certs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// boundPKI is a CA with node certificates bound to nodes 1 and 2 (each in
// its own directory, beside the CA's files).
func boundPKI(t *testing.T) (ca string, node func(id string) TLSFiles) {
	ca = t.TempDir()
	must(t, certs.CreateCA(ca, "", 0))
	for id, name := range map[uint64]string{1: "n1", 2: "n2"} {
		must(t, certs.CreateNode(ca, filepath.Join(ca, name), []string{"127.0.0.1"}, id, 0))
	}
	return ca, func(name string) TLSFiles {
		return TLSFiles{CAFile: filepath.Join(ca, certs.CACertFile),
			CertFile: filepath.Join(ca, name, certs.NodeCertFile), KeyFile: filepath.Join(ca, name, certs.NodeKeyFile)}
	}
}

// TestStolenNodeCertificateCannotActAsAnotherNode: with node 2's
// certificate (bound to node 2), a thief can claim to be node 3 neither
// on the Raft transport (batch, range message or snapshot header) nor
// when registering a node.
func TestStolenNodeCertificateCannotActAsAnotherNode(t *testing.T) {
	ca, files := boundPKI(t)
	tn := startNode(t, "", Config{NodeID: 1, Security: SecurityConfig{TLS: files("n1")}})
	stolen := tlsConfig(t, ca, filepath.Join("n2", certs.NodeCertFile), filepath.Join("n2", certs.NodeKeyFile))
	transport := raftrpcpb.NewRaftTransportClient(dialTLS(t, tn, stolen))

	messages := func(b *raftrpcpb.RaftMessageBatch) error {
		s, err := transport.RaftMessages(shortCtx(t))
		if err != nil {
			return err
		}
		_ = s.Send(b) // the answer comes on the receive side
		_, err = s.Recv()
		return err
	}
	self, cluster := tn.n.NodeID(), tn.n.ClusterID()
	wantCode(t, "a batch from node 3", messages(&raftrpcpb.RaftMessageBatch{FromNodeId: 3, ToNodeId: self, ClusterId: cluster}),
		codes.PermissionDenied)
	wantCode(t, "a batch from node 2 carrying a message of node 3", messages(&raftrpcpb.RaftMessageBatch{
		FromNodeId: 2, ToNodeId: self, ClusterId: cluster,
		Messages: []*raftrpcpb.RangeMessage{{RangeId: 1, FromNodeId: 3, ToNodeId: self}}}), codes.PermissionDenied)

	s, err := transport.Snapshot(shortCtx(t))
	must(t, err)
	_ = s.Send(&raftrpcpb.SnapshotChunk{Chunk: &raftrpcpb.SnapshotChunk_Header{Header: &raftrpcpb.SnapshotHeader{
		RangeId: 2, FromNodeId: 3, ToNodeId: self, ClusterId: cluster}}})
	_, err = s.CloseAndRecv()
	wantCode(t, "a snapshot from node 3", err, codes.PermissionDenied)

	_, err = kvpb.NewAdminClient(dialTLS(t, tn, stolen)).AddNode(shortCtx(t),
		&kvpb.AddNodeRequest{Node: &kvpb.NodeDescriptor{NodeId: 3, Address: "127.0.0.1:1"}})
	wantCode(t, "AddNode of node 3", err, codes.PermissionDenied)

	// As itself, node 2's certificate passes the check (the batch is then
	// judged on its merits: an empty one is simply acknowledged or ends).
	err = messages(&raftrpcpb.RaftMessageBatch{FromNodeId: 2, ToNodeId: self, ClusterId: cluster})
	if status.Code(err) == codes.PermissionDenied {
		t.Fatalf("node 2's own batch refused: %v", err)
	}
	if got := sumOf(scrape(t, tn)["shale_node_impersonation_refused_total"]); got < 4 {
		t.Fatalf("shale_node_impersonation_refused_total = %v, want at least 4", got)
	}
}

// TestNodeRefusesACertificateBoundToAnotherNode: node 2 does not start
// with node 1's certificate.
func TestNodeRefusesACertificateBoundToAnotherNode(t *testing.T) {
	_, files := boundPKI(t)
	_, err := New(Config{NodeID: 2, DataDir: filepath.Join(t.TempDir(), "n"), Logger: slog.New(slog.DiscardHandler),
		Security: SecurityConfig{TLS: files("n1")}})
	if err == nil || !strings.Contains(err.Error(), "bound to node 1") {
		t.Fatalf("New(node 2, node 1's certificate) = %v, want a refusal naming node 1", err)
	}
}

// TestNodeIDFromTheCertificate: a node given no ID takes the one its
// certificate is bound to (so a joining node registers as it).
func TestNodeIDFromTheCertificate(t *testing.T) {
	_, files := boundPKI(t)
	n, err := New(Config{DataDir: filepath.Join(t.TempDir(), "n"), Logger: slog.New(slog.DiscardHandler),
		Security: SecurityConfig{TLS: files("n2")}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(t.Context())
	if n.NodeID() != 2 {
		t.Fatalf("node ID = %d, want 2 from the certificate", n.NodeID())
	}
}

// TestNodeRefusesAPeerPresentingAnotherNodesCertificate: a node dialling
// node 2 refuses a server at that address whose certificate is bound to
// node 1 (a stolen certificate answering at another node's address), with
// an error naming both, and counts it; dialled as node 1 the same server
// is accepted, and so is it when only its address is known.
func TestNodeRefusesAPeerPresentingAnotherNodesCertificate(t *testing.T) {
	_, files := boundPKI(t)
	tn := startNode(t, "", Config{NodeID: 1, Security: SecurityConfig{TLS: files("n1")}})
	status := func(id uint64) error {
		cc, err := grpc.NewClient("passthrough:///"+tn.addr(), grpc.WithTransportCredentials(tn.n.peerCredentials(id)))
		must(t, err)
		defer cc.Close()
		_, err = kvpb.NewAdminClient(cc).Status(shortCtx(t), &kvpb.StatusRequest{})
		return err
	}
	err := status(2)
	if err == nil || !strings.Contains(err.Error(), "dialled node 2") || !strings.Contains(err.Error(), "bound to node 1") {
		t.Fatalf("Status dialled as node 2 = %v, want a refusal naming node 2 and node 1", err)
	}
	if got := sumOf(scrape(t, tn)["shale_node_impersonation_refused_total"]); got < 1 {
		t.Fatalf("shale_node_impersonation_refused_total = %v, want at least 1", got)
	}
	for _, id := range []uint64{1, 0} {
		if err := status(id); err != nil {
			t.Fatalf("Status dialled as node %d: %v", id, err)
		}
	}
}
