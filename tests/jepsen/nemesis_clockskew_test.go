package jepsen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shaledb/shale/api/raftrpcpb"
)

// The clock-skew nemesis shifts one node's clock through the
// /debug/faults/clock endpoint of a faults build (node/faults_on.go), for
// the hold, then puts it back. Half the time the shift is within bounds
// (50-300 ms, under the 400 ms that is 80% of the default 500 ms maximum
// offset): the node must go on serving and the histories stay
// linearizable. Otherwise it is 1-3 s, beyond the maximum offset: the
// node must stop serving timestamps (it reports
// shale_clock_offset_exceeded = 1 and its oracle refuses), and still no
// history may break. Both are checked when the fault heals; a node that
// misjudges its clock fails the run (TestClockSkewCheckCatchesPlantedBug
// plants one). It is not part of combined: under a partition a node
// cannot measure its peers, so its verdict is not checkable.

// clockPath is the clock fault endpoint of a faults build.
const clockPath = "/debug/faults/clock"

// clockTolerated is 80% of the default maximum offset: beyond it a node
// stops serving.
const clockTolerated = 400 * time.Millisecond

// needClockHook asks a node for its clock shift: a binary built without
// the faults tag answers 404.
func needClockHook(r *run) string {
	nd := r.c.nodes(false)[0]
	code, body, err := clockRequest(http.MethodGet, nd, 0)
	switch {
	case err != nil:
		return fmt.Sprintf("asking n%d for its clock offset: %v", nd.id, err)
	case code == http.StatusNotFound:
		return fmt.Sprintf("the shale binary has no clock hook (%s); make chaos builds bin/shale-faults with -tags faults", strings.TrimSpace(body))
	case code != http.StatusOK:
		return fmt.Sprintf("GET %s on n%d: %d %s", clockPath, nd.id, code, strings.TrimSpace(body))
	}
	return ""
}

// clockRequest sends one request to nd's clock endpoint (PUT with off).
func clockRequest(method string, nd *node, off time.Duration) (int, string, error) {
	u := "http://" + nd.httpAddr + clockPath
	if method == http.MethodPut {
		u += "?offset=" + off.String()
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

// clockSkewFault is one shifted node.
type clockSkewFault struct {
	nd  *node
	off time.Duration
}

// clockSkew shifts a random node's clock.
func clockSkew(r *run, rng *rand.Rand) (fault, string, error) {
	var nd *node
	for _, cand := range shuffled(r, rng) {
		if cand.running() && !cand.isPaused() {
			nd = cand
			break
		}
	}
	if nd == nil {
		return clockSkewFault{}, "no running node to skew", nil
	}
	var off time.Duration
	if rng.IntN(2) == 0 {
		off = time.Duration(50+rng.IntN(251)) * time.Millisecond
	} else {
		off = time.Duration(1000+rng.IntN(2001)) * time.Millisecond
	}
	if rng.IntN(2) == 0 {
		off = -off
	}
	f := clockSkewFault{nd: nd, off: off}
	if err := f.set(off); err != nil {
		return f, "", err
	}
	return f, fmt.Sprintf("n%d's clock %+v", nd.id, off), nil
}

func (f clockSkewFault) set(off time.Duration) error {
	method := http.MethodPut
	if off == 0 {
		method = http.MethodDelete
	}
	code, body, err := clockRequest(method, f.nd, off)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("%d %s", code, strings.TrimSpace(body))
	}
	if err != nil {
		return fmt.Errorf("shifting n%d's clock by %v: %w", f.nd.id, off, err)
	}
	return nil
}

// heal checks that the node judged its clock right, then puts it back.
func (f clockSkewFault) heal(r *run) error {
	if f.nd == nil || !f.nd.running() || f.nd.isPaused() {
		// Down (in combination): a restarted node starts unshifted.
		return nil
	}
	verdict := checkClockVerdict(f.nd, f.off)
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = f.set(0); err == nil {
			break
		}
		pause(context.Background(), 200*time.Millisecond)
	}
	return errors.Join(verdict, err)
}

// checkClockVerdict checks, after a hold of at least clockSkewHoldMin,
// that nd shifted by off says what it must: beyond bounds, that its
// clock is off (shale_clock_offset_exceeded 1) and its oracle issues
// nothing; within bounds, that it is not.
func checkClockVerdict(nd *node, off time.Duration) error {
	beyond := off > clockTolerated || off < -clockTolerated
	// The verdict may take a probe round to form (or to clear, after an
	// earlier shift of the same node): poll for a while.
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := nodeMetric(nd, "shale_clock_offset_exceeded")
		if err == nil && (v == 1) == beyond {
			break
		}
		if time.Now().After(deadline) {
			if beyond {
				return fmt.Errorf("n%d's clock is %v off, beyond the maximum offset, but it does not report so (metric %v, %v)", nd.id, off, v, err)
			}
			return fmt.Errorf("n%d's clock is %v off, within bounds, but it reports its clock beyond them (metric %v, %v)", nd.id, off, v, err)
		}
		pause(context.Background(), 100*time.Millisecond)
	}
	if beyond {
		if err := oracleCall(nd); err == nil {
			return fmt.Errorf("n%d's clock is %v off, beyond the maximum offset, but its oracle issued a timestamp", nd.id, off)
		}
	}
	return nil
}

// nodeMetric reads one unlabelled series from nd's /metrics.
func nodeMetric(nd *node, name string) (float64, error) {
	resp, err := faultHTTP.Get("http://" + nd.httpAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("n%d exports no %s", nd.id, name)
}

// oracleCall asks nd's timestamp oracle for one timestamp.
func oracleCall(nd *node) error {
	cc, err := grpc.NewClient("passthrough:///"+nd.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = raftrpcpb.NewTimestampOracleClient(cc).Timestamps(ctx, &raftrpcpb.TimestampsRequest{Count: 1})
	return err
}

// clockSkewHoldMin is long enough for a node to see its clock beyond
// bounds: a probe round (2 s) and the guard's next look.
const clockSkewHoldMin = 4 * time.Second

// TestClockSkewCheckCatchesPlantedBug: the clock-skew nemesis's check
// passes on a node that judges its clock right, and fails on one that
// cannot tell its clock is off (planted: a maximum offset of an hour, so
// a 2 s shift looks within bounds to it).
func TestClockSkewCheckCatchesPlantedBug(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping a multi-process test in -short mode")
	}
	c := &cluster{t: t, bin: faultsBinary(t), dir: t.TempDir(), byID: map[uint64]*node{}, next: 4}
	var members []string
	for id := uint64(1); id <= 3; id++ {
		nd := c.newNode(id)
		members = append(members, fmt.Sprintf("%d=%s", id, nd.grpcAddr))
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes(true) {
			nd.kill()
		}
	})
	for id := uint64(1); id <= 3; id++ {
		args := []string{"--initial-cluster", strings.Join(members, ",")}
		if id == 3 {
			args = append(args, "--max-clock-offset", "1h") // the planted bug
		}
		if err := c.start(id, args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.waitLeaders(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id      uint64
		off     time.Duration
		caught  bool
		explain string
	}{
		{2, 80 * time.Millisecond, false, "a node within bounds"},
		{2, -2 * time.Second, false, "a node beyond bounds that stops serving"},
		{3, 2 * time.Second, true, "the planted node beyond bounds"},
	} {
		f := clockSkewFault{nd: c.node(tc.id), off: tc.off}
		if err := f.set(tc.off); err != nil {
			t.Fatal(err)
		}
		pause(context.Background(), clockSkewHoldMin)
		err := checkClockVerdict(f.nd, f.off)
		if clearErr := f.set(0); clearErr != nil {
			t.Fatal(clearErr)
		}
		if (err != nil) != tc.caught {
			t.Fatalf("%s (n%d %+v): check says %v", tc.explain, tc.id, tc.off, err)
		}
		t.Logf("%s (n%d %+v): check says %v", tc.explain, tc.id, tc.off, err)
		// Let the shifted node's peers measure it right again.
		if err := checkClockVerdict(f.nd, 0); err != nil && !tc.caught {
			t.Fatalf("after putting n%d's clock back: %v", tc.id, err)
		}
	}
}
