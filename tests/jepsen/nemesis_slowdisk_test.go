package jepsen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// The slow-disk nemesis slows the fsyncs of some nodes' engines (and, a
// third of the time, their appends) by tens to hundreds of milliseconds,
// through the /debug/faults/disk endpoint that only a binary built with
// the `faults` tag serves (node/faults_on.go; `make chaos` and
// shaleBinary build one).
//
// A slow disk alone moves no leadership while its syncs stay below the
// disk-stall threshold (the election timeout, at least 1 s): the Raft log
// writer persists appends beside the processing loop, so heartbeats keep
// flowing while a sync sleeps. Half the time a slowed leader is stalled
// instead (fsyncs of seconds), and must hand its leadership on by itself
// (raft/diskstall.go). A slow
// follower merely lags; the interesting case is a slow leader (a quorum
// of followers commits before the leader's own log is durable) and a slow
// majority (every commit waits for a slow fsync). So the nemesis also
// hands one range's leadership to a slowed node: each cycle then has a
// slow leader, and the leader changes the run counts come from those
// transfers (and from whatever the slowness causes), as docs/testing.md
// says.

// slowDiskPath is the fault endpoint of a faults build.
const slowDiskPath = "/debug/faults/disk"

// faultHTTP talks to the fault endpoints. Its timeout bounds a call to a
// node that stopped answering (a paused node, in combination).
var faultHTTP = &http.Client{Timeout: 2 * time.Second}

// needSlowDisk asks a node for its disk delays: a binary built without the
// faults tag answers 404 and says so.
func needSlowDisk(r *run) string {
	nd := r.c.nodes(false)[0]
	code, body, err := faultRequest(http.MethodGet, nd, "")
	switch {
	case err != nil:
		return fmt.Sprintf("asking n%d for its disk delays: %v", nd.id, err)
	case code == http.StatusNotFound:
		return fmt.Sprintf("the shale binary has no slow-disk hook (%s); make chaos builds bin/shale-faults with -tags faults", strings.TrimSpace(body))
	case code != http.StatusOK:
		return fmt.Sprintf("GET %s on n%d: %d %s", slowDiskPath, nd.id, code, strings.TrimSpace(body))
	}
	return ""
}

// faultRequest sends one request to nd's fault endpoint.
func faultRequest(method string, nd *node, query string) (int, string, error) {
	u := "http://" + nd.httpAddr + slowDiskPath
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := faultHTTP.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// slowDiskFault clears the delays of the nodes it slowed.
type slowDiskFault struct{ nodes []*node }

// heal clears every slowed node's delays. A node that is down needs
// nothing: delays live in the process, and a restarted node starts with
// none.
func (f slowDiskFault) heal(r *run) error {
	var errs []error
	for _, nd := range f.nodes {
		var err error
		for attempt := 0; attempt < 5 && nd.running(); attempt++ {
			var code int
			var body string
			code, body, err = faultRequest(http.MethodDelete, nd, "")
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("DELETE %s: %d %s", slowDiskPath, code, strings.TrimSpace(body))
			}
			if err == nil {
				break
			}
			pause(context.Background(), 200*time.Millisecond)
		}
		if err != nil && nd.running() {
			errs = append(errs, fmt.Errorf("clearing n%d's disk delays: %w", nd.id, err))
		}
	}
	return errors.Join(errs...)
}

// replicaGroup is one range's voters and leader, as Ranges reports them.
type replicaGroup struct {
	rangeID uint64
	leader  uint64 // 0: unknown
	voters  []*node
}

// replicaGroups lists every range's voters among the running nodes, in
// range order; nil if Ranges does not answer (in combination with a
// partition, say).
func replicaGroups(r *run) []replicaGroup {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := r.admin().Ranges(ctx)
	if err != nil {
		return nil
	}
	var out []replicaGroup
	for _, rs := range resp.GetRanges() {
		g := replicaGroup{rangeID: rs.GetRangeDescriptor().GetRangeId(), leader: rs.GetLeaderNodeId()}
		for _, rd := range rs.GetRangeDescriptor().GetReplicas() {
			if rd.GetType() != kvpb.ReplicaType_REPLICA_TYPE_VOTER {
				continue
			}
			if nd := r.c.node(rd.GetNodeId()); nd != nil && !nd.isRemoved() {
				g.voters = append(g.voters, nd)
			}
		}
		if len(g.voters) > 0 {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rangeID < out[j].rangeID })
	return out
}

// slowDisk slows the disks of some of a random range's voters (so that
// the delays land on a replica group): its leader, one other voter, or a
// majority of them; a quarter of the time a majority of all nodes. Then
// it moves a range's leadership onto a slowed node.
func slowDisk(r *run, rng *rand.Rand) (fault, string, error) {
	groups := replicaGroups(r)
	all := shuffled(r, rng)
	group := all // without Ranges: the whole cluster
	var leader *node
	if len(groups) > 0 {
		g := groups[rng.IntN(len(groups))]
		group = append([]*node(nil), g.voters...)
		rng.Shuffle(len(group), func(i, j int) { group[i], group[j] = group[j], group[i] })
		leader = r.c.node(g.leader)
	}
	var victims []*node
	switch k := rng.IntN(4); {
	case k == 0 && leader != nil: // the group's leader
		victims = []*node{leader}
	case k <= 1: // one voter
		victims = group[:1]
	case k == 2: // a majority of the group
		victims = group[:len(group)/2+1]
	default: // a majority of the cluster
		victims = all[:len(all)/2+1]
	}
	delay := time.Duration(20+rng.IntN(381)) * time.Millisecond
	jitter := delay / 2
	if len(victims) == 1 && victims[0] == leader && rng.IntN(2) == 0 {
		// A stalled leader: each fsync hangs for seconds, past the
		// disk-stall threshold, so the leader must hand its leadership
		// on (raft/diskstall.go) for its range to take writes again.
		delay, jitter = time.Duration(1500+rng.IntN(1501))*time.Millisecond, 200*time.Millisecond
	}
	q := url.Values{"ops": {"sync"}, "delay": {delay.String()}, "jitter": {jitter.String()}}
	desc := fmt.Sprintf("fsync +%v-%v", delay, delay+jitter)
	if rng.IntN(3) == 0 {
		// Appends too: each holds the engine's write queue, so a slow
		// append slows every write of the node, not only synced ones.
		q.Set("ops", "sync,append")
		desc = fmt.Sprintf("fsync and append +%v-%v", delay, delay+jitter)
	}
	f := slowDiskFault{}
	for _, nd := range victims {
		if !nd.running() || nd.isPaused() {
			continue // down already (in combination): nothing to slow
		}
		code, body, err := faultRequest(http.MethodPut, nd, q.Encode())
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%d %s", code, strings.TrimSpace(body))
		}
		if err != nil {
			return f, "", fmt.Errorf("slowing n%d's disk: %w", nd.id, err)
		}
		f.nodes = append(f.nodes, nd)
	}
	desc = "slow disk " + names(f.nodes) + ": " + desc
	if len(f.nodes) == 0 {
		return f, desc + " (every chosen node is down)", nil
	}
	return f, desc + "; " + leadOnto(r, rng, groups, f.nodes), nil
}

// leadOnto hands the leadership of a range that no slowed node leads but
// one holds a voter of to that slowed node. When slowed nodes lead every
// such range already, it moves one from a slowed leader to another slowed
// voter instead: an election among slow disks (a vote waits for its
// HardState to be synced). It says what it did.
func leadOnto(r *run, rng *rand.Rand, groups []replicaGroup, slowed []*node) string {
	type move struct {
		rangeID, from uint64
		to            *node
	}
	var onto, between []move
	for _, g := range groups {
		if g.leader == 0 {
			continue
		}
		for _, nd := range g.voters {
			switch {
			case !containsNode(slowed, nd.id) || nd.id == g.leader:
			case containsNode(slowed, g.leader):
				between = append(between, move{g.rangeID, g.leader, nd})
			default:
				onto = append(onto, move{g.rangeID, g.leader, nd})
			}
		}
	}
	moves := onto
	if len(moves) == 0 {
		moves = between
	}
	if len(moves) == 0 {
		return "no leadership to move: the slowed nodes lead every range they hold a voter of, alone"
	}
	m := moves[rng.IntN(len(moves))]
	// A slowed target catches up and campaigns at the pace of its disk.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.admin().TransferLeader(ctx, m.rangeID, m.to.id); err != nil {
		msg := err.Error()
		if len(msg) > 100 {
			msg = msg[:100] + "..."
		}
		return fmt.Sprintf("r%d transfer n%d->n%d: %s", m.rangeID, m.from, m.to.id, msg)
	}
	return fmt.Sprintf("r%d n%d->n%d", m.rangeID, m.from, m.to.id)
}
