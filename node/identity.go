package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/shaledb/shale/api/kvpb"
)

// Cluster identity (docs/operations.md, "Cluster identity").
//
// A cluster ID is random, made once when the cluster is bootstrapped, and
// recorded in every node's data directory with its node ID. It travels on
// every Raft message and snapshot (raft/transport) and, as gRPC metadata,
// on every node-to-node call and on client calls that name a cluster
// (clusterInterceptor); a node refuses traffic of another cluster. An ID
// derived from the member list would make two clusters started on the same
// addresses (two `make run`s, two Compose projects) one cluster in the
// eyes of their nodes, and a data directory of the one would be accepted
// by the other.
//
// A random ID must still be the same on every initial member, so one
// member makes it and the others learn it:
//
//   - The seed, the initial member with the lowest node ID, bootstraps with
//     a new random ID unless another member already serves a cluster.
//   - Every other initial member waits until a member serves, and
//     bootstraps with that member's cluster ID.
//   - --cluster-id given on every member names the ID instead; no member
//     waits for another.
//
// Whoever answers, a node with an empty data directory bootstraps only if
// the cluster's registry lists it at its address and does not mark it as
// started: a node that has served once and lost its directory has lost the
// votes and log entries it acknowledged, and voting again with an empty
// log could undo committed writes (etcd refuses the same "member has
// already been bootstrapped"). Such a node must be removed and joined
// again as a new node.
//
// A node restarted on a data directory checks the other initial members:
// if some answer and none is of the directory's cluster, the directory
// belongs to another cluster and the node refuses to start.

// newClusterID returns a new random cluster ID.
func newClusterID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("node: reading random bytes for a cluster ID: %v", err))
	}
	return "shale-" + hex.EncodeToString(b[:])
}

// peerProbeTimeout bounds one Status call to another member while a node
// finds out which cluster it belongs to. A member that does not answer in
// time is taken to be down.
const peerProbeTimeout = time.Second

// peerAnswer is what one member said when asked for its status.
type peerAnswer struct {
	addr string
	resp *kvpb.StatusResponse
	err  error
}

// peerAt is another node to probe: its address and, when known, its ID
// (0: unknown).
type peerAt struct {
	id   uint64
	addr string
}

// probe asks each node for its status, all at once, each for at most
// peerProbeTimeout.
func (n *Node) probe(ctx context.Context, peers []peerAt) []peerAnswer {
	answers := make([]peerAnswer, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, peerProbeTimeout)
			defer cancel()
			resp, err := n.peerStatus(pctx, p)
			answers[i] = peerAnswer{addr: p.addr, resp: resp, err: err}
		}()
	}
	wg.Wait()
	return answers
}

// otherMembers returns the initial members other than node self.
func (n *Node) otherMembers(self uint64) []peerAt {
	var out []peerAt
	for _, m := range n.cfg.InitialCluster {
		if m.GetNodeId() != self && m.GetAddress() != n.cfg.AdvertiseAddr {
			out = append(out, peerAt{id: m.GetNodeId(), addr: m.GetAddress()})
		}
	}
	return out
}

// peerStatus asks node p for its full status, over the peer credentials:
// when p's ID is known, a server whose certificate is bound to another
// node is refused, so a stolen certificate answering at a member's
// address cannot hand this node another cluster's ID. It fails rather
// than waits when the node is not serving.
func (n *Node) peerStatus(ctx context.Context, p peerAt) (*kvpb.StatusResponse, error) {
	cc, err := grpc.NewClient("passthrough:///"+p.addr, grpc.WithTransportCredentials(n.peerCredentials(p.id)))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	return kvpb.NewAdminClient(cc).Status(ctx, &kvpb.StatusRequest{})
}

// seedOf returns the ID of the member that makes a new cluster's ID: the
// lowest in the initial cluster.
func seedOf(members []*kvpb.NodeDescriptor) *kvpb.NodeDescriptor {
	seed := members[0]
	for _, m := range members[1:] {
		if m.GetNodeId() < seed.GetNodeId() {
			seed = m
		}
	}
	return seed
}

// errAlreadyStarted and errNotAMember say why a node with an empty data
// directory may not bootstrap into the cluster that answered.
var (
	errAlreadyStarted = errors.New("has served in this cluster before and its data directory is now empty")
	errNotAMember     = errors.New("is not a member of the cluster there")
)

// clusterToJoin decides, from one member's answer, whether node self at
// addr may bootstrap as an initial member of that member's cluster.
func clusterToJoin(resp *kvpb.StatusResponse, self uint64, addr string) error {
	for _, m := range resp.GetMembers() {
		if m.GetNodeId() != self {
			continue
		}
		if addr != "" && m.GetAddress() != addr && m.GetAddress() != unknownAddress {
			return fmt.Errorf("%w (it lists node %d at %s, not %s)", errNotAMember, self, m.GetAddress(), addr)
		}
		if m.GetStarted() {
			return errAlreadyStarted
		}
		return nil
	}
	return fmt.Errorf("%w (its registry has no node %d)", errNotAMember, self)
}

// initialClusterID returns the ID under which node self bootstraps as an
// initial member, waiting for the seed when it is not the seed itself. It
// fails, and the node bootstraps nothing, when a member serves a cluster
// this node may not (re)enter.
func (n *Node) initialClusterID(self uint64) (string, error) {
	cfg := &n.cfg
	seed := seedOf(cfg.InitialCluster)
	ctx := context.Background()
	waitingSince := time.Now()
	lastLog := time.Time{}
	for {
		answers := n.probe(ctx, n.otherMembers(self))
		for _, a := range answers {
			if a.err != nil || a.resp.GetClusterId() == "" || len(a.resp.GetMembers()) == 0 {
				continue // down, or up without a registry to judge by yet
			}
			id := a.resp.GetClusterId()
			if cfg.ClusterID != "" && id != cfg.ClusterID {
				return "", fmt.Errorf("node: the node at %s belongs to cluster %q, not %q (--cluster-id): is another cluster using these addresses?", a.addr, id, cfg.ClusterID)
			}
			if err := clusterToJoin(a.resp, self, cfg.AdvertiseAddr); err != nil {
				hint := ""
				if errors.Is(err, errAlreadyStarted) {
					hint = fmt.Sprintf("; to bring it back, remove it (shalectl node remove %d) and start it with --join and an empty data directory", self)
				}
				return "", fmt.Errorf("node: cluster %q answered at %s, and node %d %w%s", id, a.addr, self, err, hint)
			}
			return id, nil
		}
		if cfg.ClusterID != "" {
			return cfg.ClusterID, nil
		}
		if self == seed.GetNodeId() {
			return newClusterID(), nil
		}
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			n.log.Info("waiting for the seed to bootstrap the cluster",
				"seed", seed.GetNodeId(), "seed_address", seed.GetAddress(),
				"waited", time.Since(waitingSince).Round(time.Second), "members", describeAnswers(answers))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkDirectoryCluster refuses the data directory, which belongs to
// cluster id, when the other nodes it knows of (the initial members, and
// the peers its replicas know) answer and all belong to another cluster.
// Nodes that do not answer prove nothing: they may be down. It runs before
// replication starts, so a refused directory changes nothing anywhere.
func (n *Node) checkDirectoryCluster(id string) error {
	seen := map[peerAt]bool{}
	var peers []peerAt
	add := func(p peerAt) {
		if p.addr != "" && p.addr != unknownAddress && p.addr != n.cfg.AdvertiseAddr && !seen[p] {
			seen[p] = true
			peers = append(peers, p)
		}
	}
	for _, p := range n.otherMembers(n.ident.NodeID) {
		add(p)
	}
	for peer, a := range n.store.PeerAddresses() {
		if peer != n.ident.NodeID {
			add(peerAt{id: peer, addr: a})
		}
	}
	var foreign []string
	for _, a := range n.probe(context.Background(), peers) {
		if a.err != nil || a.resp.GetClusterId() == "" {
			continue
		}
		if a.resp.GetClusterId() == id {
			return nil
		}
		foreign = append(foreign, fmt.Sprintf("%s is in cluster %q", a.addr, a.resp.GetClusterId()))
	}
	if len(foreign) == 0 {
		return nil
	}
	sort.Strings(foreign)
	return fmt.Errorf("node: data directory %s belongs to cluster %q, but %s: it is another cluster's directory; start this node on its own directory", n.cfg.DataDir, id, strings.Join(foreign, ", "))
}

// describeAnswers says briefly why each member did not serve a cluster.
func describeAnswers(answers []peerAnswer) string {
	parts := make([]string, 0, len(answers))
	for _, a := range answers {
		switch {
		case a.err != nil:
			parts = append(parts, a.addr+": not serving")
		default:
			parts = append(parts, a.addr+": no registry yet")
		}
	}
	return strings.Join(parts, ", ")
}
