package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/storage"
)

// How a node becomes part of a cluster, on its first start (an initialized
// data directory remembers its cluster and node ID, and these settings are
// then ignored):
//
//   - Config.InitialCluster set: a new cluster of those members. Every
//     initial node is started with the same list; each bootstraps the same
//     two ranges (meta and the whole user key space) with a voter on every
//     member (raft.Bootstrap).
//   - Config.Join set: an existing cluster. The node asks a member to
//     register it (Admin.AddNode), which gives it its node ID, and starts
//     with no replicas; replicas are added with Admin.ChangeReplicas
//     (`shalectl node add`).
//   - neither: a one-node cluster of this node alone.

// ParseInitialCluster parses "1=host:port,2=host:port,...".
func ParseInitialCluster(s string) ([]*kvpb.NodeDescriptor, error) {
	var out []*kvpb.NodeDescriptor
	seen := map[uint64]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok || addr == "" {
			return nil, fmt.Errorf("initial cluster member %q: want id=host:port", part)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(id), 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("initial cluster member %q: the node ID must be a number > 0", part)
		}
		if seen[n] {
			return nil, fmt.Errorf("initial cluster: node %d listed twice", n)
		}
		seen[n] = true
		out = append(out, &kvpb.NodeDescriptor{NodeId: n, Address: strings.TrimSpace(addr)})
	}
	if len(out) == 0 {
		return nil, errors.New("initial cluster is empty")
	}
	return out, nil
}

// unknownAddress stands in the registry for a one-node cluster's own
// address until Serve knows it (see registerSelf).
const unknownAddress = "unknown"

// initStore makes sure the engine holds a store identity, bootstrapping or
// joining as the configuration says, and returns it with the peers known
// so far.
func (n *Node) initStore(db *storage.DB) (*raft.StoreIdent, map[uint64]string, error) {
	cfg := &n.cfg
	peers := map[uint64]string{}
	for _, m := range cfg.InitialCluster {
		peers[m.GetNodeId()] = m.GetAddress()
	}
	ident, err := raft.ReadStoreIdent(db)
	if err != nil {
		return nil, nil, err
	}
	if ident != nil {
		if cfg.NodeID != 0 && cfg.NodeID != ident.NodeID {
			return nil, nil, fmt.Errorf("node: data directory %s belongs to node %d, not node %d", db.Dir(), ident.NodeID, cfg.NodeID)
		}
		if cfg.ClusterID != "" && cfg.ClusterID != ident.ClusterID {
			return nil, nil, fmt.Errorf("node: data directory %s belongs to cluster %q, not %q", db.Dir(), ident.ClusterID, cfg.ClusterID)
		}
		return ident, peers, nil
	}
	switch {
	case len(cfg.InitialCluster) > 0 && len(cfg.Join) > 0:
		return nil, nil, errors.New("node: give an initial cluster or addresses to join, not both")

	case len(cfg.InitialCluster) > 0:
		id := cfg.NodeID
		if id == 0 {
			// Find ourselves in the list by address.
			for _, m := range cfg.InitialCluster {
				if m.GetAddress() == cfg.AdvertiseAddr && cfg.AdvertiseAddr != "" {
					id = m.GetNodeId()
				}
			}
			if id == 0 {
				return nil, nil, fmt.Errorf("node: no node ID given and advertise address %q is not in the initial cluster", cfg.AdvertiseAddr)
			}
		}
		clusterID, err := n.initialClusterID(id)
		if err != nil {
			return nil, nil, err
		}
		if err := raft.Bootstrap(db, clusterID, id, cfg.InitialCluster); err != nil {
			return nil, nil, fmt.Errorf("node: bootstrapping: %w", err)
		}
		n.log.Info("bootstrapped a new cluster", "cluster_id", clusterID, "node_id", id, "members", len(cfg.InitialCluster))
		return &raft.StoreIdent{ClusterID: clusterID, NodeID: id}, peers, nil

	case len(cfg.Join) > 0:
		ident, members, err := n.join()
		if err != nil {
			return nil, nil, err
		}
		if err := raft.WriteStoreIdent(db, *ident); err != nil {
			return nil, nil, err
		}
		for _, m := range members {
			peers[m.GetNodeId()] = m.GetAddress()
		}
		n.log.Info("joined the cluster", "cluster_id", ident.ClusterID, "node_id", ident.NodeID)
		return ident, peers, nil

	default:
		id := max(cfg.NodeID, 1)
		addr := cfg.AdvertiseAddr
		if addr == "" {
			addr = unknownAddress
		}
		self := []*kvpb.NodeDescriptor{{NodeId: id, Address: addr}}
		clusterID := cfg.ClusterID
		if clusterID == "" {
			clusterID = newClusterID()
		}
		if err := raft.Bootstrap(db, clusterID, id, self); err != nil {
			return nil, nil, fmt.Errorf("node: bootstrapping: %w", err)
		}
		n.log.Info("bootstrapped a one-node cluster", "cluster_id", clusterID, "node_id", id)
		return &raft.StoreIdent{ClusterID: clusterID, NodeID: id}, peers, nil
	}
}

// join registers this node with a member of the cluster at one of the
// Join addresses, retrying until one answers (the cluster may be
// starting) or a minute passes.
func (n *Node) join() (*raft.StoreIdent, []*kvpb.NodeDescriptor, error) {
	cfg := &n.cfg
	if cfg.AdvertiseAddr == "" {
		return nil, nil, errors.New("node: joining needs the address other nodes reach this node at (advertise address)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var last error
	for attempt := 0; ctx.Err() == nil; attempt++ {
		for _, addr := range cfg.Join {
			ident, members, err := n.joinVia(ctx, addr)
			if err == nil {
				return ident, members, nil
			}
			last = fmt.Errorf("%s: %w", addr, err)
		}
		if attempt%10 == 0 {
			n.log.Warn("cannot join the cluster yet; retrying", "err", last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil, nil, fmt.Errorf("node: joining through %v: %w", cfg.Join, last)
}

func (n *Node) joinVia(ctx context.Context, addr string) (*raft.StoreIdent, []*kvpb.NodeDescriptor, error) {
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(n.peerCredentials(0)))
	if err != nil {
		return nil, nil, err
	}
	defer cc.Close()
	admin := kvpb.NewAdminClient(cc)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := admin.Status(cctx, &kvpb.StatusRequest{})
	if err != nil {
		return nil, nil, err
	}
	if n.cfg.ClusterID != "" && st.GetClusterId() != n.cfg.ClusterID {
		return nil, nil, fmt.Errorf("the node there belongs to cluster %q, not %q", st.GetClusterId(), n.cfg.ClusterID)
	}
	resp, err := admin.AddNode(cctx, &kvpb.AddNodeRequest{Node: &kvpb.NodeDescriptor{
		NodeId: n.cfg.NodeID, Address: n.cfg.AdvertiseAddr, HttpAddress: n.cfg.AdvertiseHTTPAddr,
	}})
	if err != nil {
		return nil, nil, err
	}
	if n.cfg.NodeID != 0 && resp.GetNodeId() != n.cfg.NodeID {
		return nil, nil, fmt.Errorf("the cluster registered this node as %d, not %d", resp.GetNodeId(), n.cfg.NodeID)
	}
	return &raft.StoreIdent{ClusterID: st.GetClusterId(), NodeID: resp.GetNodeId()}, resp.GetMembers(), nil
}

// registerSelf keeps this node's registry entry in meta up to date with
// the addresses it serves at (they can change between starts, and a
// one-node cluster bootstraps before it knows them). It retries until it
// succeeds or the node stops.
func (n *Node) registerSelf(ctx context.Context) {
	self := n.descriptor()
	for attempt := 0; ctx.Err() == nil; attempt++ {
		nodes, err := n.store.MetaNodes()
		if errors.Is(err, raft.ErrRangeNotFound) {
			return // no copy of meta here: the entry was written when we joined
		}
		if err == nil {
			for _, m := range nodes {
				if m.GetNodeId() == self.GetNodeId() && m.GetAddress() == self.GetAddress() && m.GetHttpAddress() == self.GetHttpAddress() && m.GetStarted() {
					return
				}
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = n.store.RegisterNode(rctx, self)
			cancel()
			if err == nil {
				continue // check again that it applied here
			}
		}
		if attempt%20 == 19 {
			n.log.Warn("cannot update this node's entry in the registry yet", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}
