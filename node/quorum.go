package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// No quorum (docs/operations.md, "Failures").
//
// A range whose voters are mostly down has no leader and cannot elect
// one, and a leader cut off from its quorum steps down (CheckQuorum)
// within an election timeout; its lease, confirmed only by a quorum,
// lapses sooner. A request to such a range used to wait out its whole
// deadline and fail naming whatever it tried last. Instead, before a
// write is proposed or a linearizable read waits for its barrier, the
// node checks whether a quorum of the range's voters is reachable: a
// voter is unreachable when this node has neither had a Raft message
// from its node nor a health-probe answer (liveness.go) for two election
// timeouts (the longest randomized one: live peers answer pre-votes and
// heartbeats well within it). If fewer than a quorum are reachable, the
// request is refused at once with Unavailable + NoQuorum, naming them:
// it was not proposed, so a write's failure is definite.
//
// Silence alone is not proof (a follower hears only from its leaders, and
// health probes run seconds apart), so each silent voter must also fail a
// health probe started then, within an election timeout.
//
// A node that was itself paused (or just started) has stale contact
// times through no fault of its peers, so it judges only once it has been
// awake for the same two election timeouts.

// unreachableAfter is how long a voter may be silent before it counts as
// unreachable: the longest randomized election timeout.
func (n *Node) unreachableAfter() time.Duration {
	cfg := n.store.Config()
	return 2 * time.Duration(cfg.ElectionTicks) * cfg.TickInterval
}

// quorumProbes are the health probes noQuorum starts, one at a time per
// node, to confirm that a silent voter is unreachable.
type quorumProbes struct {
	mu sync.Mutex
	m  map[uint64]*quorumProbe
}

type quorumProbe struct {
	running  bool
	failedAt time.Time // when the last failed probe started
}

// failedSince reports whether a probe of node id started after cutoff has
// failed; if not, and none is running, it starts one (within an election
// timeout; a node that answers is noted live).
func (p *quorumProbes) failedSince(n *Node, id uint64, cutoff time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[uint64]*quorumProbe{}
	}
	st := p.m[id]
	if st == nil {
		st = &quorumProbe{}
		p.m[id] = st
	}
	if st.failedAt.After(cutoff) {
		return true
	}
	if !st.running {
		st.running = true
		go p.run(n, id, st)
	}
	return false
}

func (p *quorumProbes) run(n *Node, id uint64, st *quorumProbe) {
	start := time.Now()
	cfg := n.store.Config()
	ctx, cancel := context.WithTimeout(n.bgCtx, time.Duration(cfg.ElectionTicks)*cfg.TickInterval)
	defer cancel()
	ok := false
	if cc, err := n.peers.conn(id); err == nil {
		resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		ok = err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	}
	if ok {
		n.live.note(id, time.Now())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st.running = false
	if !ok {
		st.failedAt = start
	}
}

// isVoter reports whether a replica of type t votes.
func isVoter(t kvpb.ReplicaType) bool {
	return t != kvpb.ReplicaType_REPLICA_TYPE_LEARNER
}

// noQuorum returns, for a range r without a leader or led by this node,
// an Unavailable + NoQuorum status when fewer than a quorum of desc's
// voters are reachable from this node; nil otherwise.
func (n *Node) noQuorum(op string, r *raft.Replica, desc *kvpb.RangeDescriptor) error {
	now := time.Now()
	after := n.unreachableAfter()
	cutoff := now.Add(-after)
	// The store's ticker notices this node's own pauses (raft/awake.go).
	if s := n.store.AwakeSince(); s.IsZero() || s.After(cutoff) || n.started.After(cutoff) {
		return nil
	}
	voters := 0
	var unreachable []uint64
	for _, rd := range desc.GetReplicas() {
		if !isVoter(rd.GetType()) {
			continue
		}
		voters++
		id := rd.GetNodeId()
		if id == n.ident.NodeID {
			continue
		}
		// Raft contact first: it costs no lock, and a leader hears from
		// its followers every heartbeat.
		if n.store.LastContact(id).After(cutoff) || n.live.last(id).After(cutoff) {
			continue
		}
		unreachable = append(unreachable, id)
	}
	if voters-len(unreachable) > voters/2 {
		return nil
	}
	// Silence alone is not proof: a follower hears only from its leaders,
	// and the liveness probes are seconds apart. Each silent voter must
	// also have failed a health probe started since the cutoff; until
	// then (the probe is started here) the request waits on.
	for _, id := range unreachable {
		if !n.quorumProbes.failedSince(n, id, cutoff) {
			return nil
		}
	}
	names := make([]string, len(unreachable))
	for i, id := range unreachable {
		names[i] = fmt.Sprint("n", id)
	}
	st := status.Newf(codes.Unavailable, "%s: range %d has no quorum: %d of %d replicas unreachable (%s) for over %v; not applied",
		op, r.RangeID(), len(unreachable), voters, strings.Join(names, ", "), after)
	return withDetails(st, &kvpb.NoQuorum{RangeId: r.RangeID(), Voters: uint32(voters), UnreachableNodes: unreachable},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(after)})
}

// awaitLeader waits, while r's range has no known leader (an election is
// under way), until one is known, for up to two election timeouts or the
// request's deadline: a request arriving during an election is served
// once it ends instead of being turned away. It fails at once with
// NoQuorum when the range cannot have a leader (noQuorum), and so does a
// leader that cannot reach a quorum. Otherwise the caller then proposes
// or reads, and gets NotLeader with a hint if the leader is elsewhere.
func (n *Node) awaitLeader(ctx context.Context, op string, r *raft.Replica, desc *kvpb.RangeDescriptor) error {
	if r.HasLeader() {
		if r.IsLeader() {
			return n.noQuorum(op, r, desc)
		}
		return nil
	}
	cfg := n.store.Config()
	deadline := time.Now().Add(2 * time.Duration(cfg.ElectionTicks) * cfg.TickInterval)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !r.HasLeader() && time.Now().Before(deadline) {
		if err := n.noQuorum(op, r, desc); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
	if !r.HasLeader() {
		return n.noQuorum(op, r, desc)
	}
	return nil
}
