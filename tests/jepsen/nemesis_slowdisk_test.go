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

	"google.golang.org/grpc/status"
)

// The slow-disk nemesis slows the fsyncs of some nodes' engines (and, a
// third of the time, their appends) by tens to hundreds of milliseconds,
// through the /debug/faults/disk endpoint that only a binary built with
// the `faults` tag serves (node/faults_on.go; `make chaos` and
// shaleBinary build one).
//
// A slow disk alone moves no leadership: the Raft log writer persists
// appends beside the processing loop, so heartbeats keep flowing while a
// sync sleeps, and the delays stay below the election timeout. A slow
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

// slowDisk slows the disks of one node (a range's leader half the time),
// a minority or a majority, then moves a range's leadership onto one of
// them.
func slowDisk(r *run, rng *rand.Rand) (fault, string, error) {
	all := shuffled(r, rng)
	var victims []*node
	switch k := rng.IntN(4); {
	case k < 2: // one node
		victims = all[:1]
		if k == 0 {
			victims = []*node{randomLeader(r, rng)}
		}
	case k == 2: // a minority
		victims = all[:max(1, (len(all)-1)/2)]
	default: // a majority
		victims = all[:len(all)/2+1]
	}
	delay := time.Duration(20+rng.IntN(381)) * time.Millisecond
	jitter := delay / 2
	q := url.Values{"ops": {"sync"}, "delay": {delay.String()}, "jitter": {jitter.String()}}
	desc := fmt.Sprintf("fsync +%v-%v", delay, delay+jitter)
	if rng.IntN(3) == 0 {
		// Appends too, more lightly: each also holds the engine's write
		// queue, so a slow append slows the node's every write.
		q.Set("ops", "sync,append")
		desc = fmt.Sprintf("fsync and append +%v-%v", delay, delay+jitter)
	}
	f := slowDiskFault{}
	var slowed []*node
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
		slowed = append(slowed, nd)
	}
	desc = "slow disk " + names(slowed) + ": " + desc
	if len(slowed) == 0 {
		return f, desc + " (every chosen node is down)", nil
	}
	return f, desc + "; " + leadOnto(r, rng, slowed), nil
}

// leadOnto hands the leadership of a range that no slowed node leads to a
// slowed node, and says what it did.
func leadOnto(r *run, rng *rand.Rand, slowed []*node) string {
	ls := r.c.leaders(500 * time.Millisecond)
	var candidates []uint64
	for id, li := range ls {
		if !containsNode(slowed, li.node) {
			candidates = append(candidates, id)
		}
	}
	if len(candidates) == 0 {
		return "slowed nodes lead every range"
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i] < candidates[j] })
	rangeID := candidates[rng.IntN(len(candidates))]
	target := slowed[rng.IntN(len(slowed))]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := r.admin().TransferLeader(ctx, rangeID, target.id); err != nil {
		return fmt.Sprintf("r%d transfer to n%d: %v", rangeID, target.id, status.Code(err))
	}
	return fmt.Sprintf("r%d n%d->n%d", rangeID, ls[rangeID].node, target.id)
}
