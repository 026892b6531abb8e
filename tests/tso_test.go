package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/hlc"
)

// The timestamp oracle on real nodes (docs/versions.md, "How the
// oracle works"): its timestamps only go up, across failovers of the
// meta range's leadership, and a node whose clock is beyond the maximum
// offset stops serving as the oracle and starts again by itself.

// oracleTimestamp asks the running nodes' TimestampOracle service for one
// timestamp until one answers (the one holding meta's lease), within
// timeout, and returns it with the node that issued it.
func (c *testCluster) oracleTimestamp(timeout time.Duration) (hlc.Timestamp, uint64) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		for _, cn := range c.all() {
			if !cn.running() {
				continue
			}
			ts, err := c.oracleCall(cn.id)
			if err == nil {
				return ts, cn.id
			}
			last = err
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no node issued a timestamp within %v: %v", timeout, last)
	return hlc.Timestamp{}, 0
}

// oracleCall asks node id's oracle for one timestamp.
func (c *testCluster) oracleCall(id uint64) (hlc.Timestamp, error) {
	cc, err := grpc.NewClient("passthrough:///"+c.node(id).grpcAddr, grpc.WithTransportCredentials(c.dialCreds()))
	if err != nil {
		return hlc.Timestamp{}, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := raftrpcpb.NewTimestampOracleClient(cc).Timestamps(ctx, &raftrpcpb.TimestampsRequest{Count: 1})
	if err != nil {
		return hlc.Timestamp{}, err
	}
	return hlc.Timestamp{WallTime: resp.GetFirst().GetWallNanos(), Logical: int32(resp.GetFirst().GetLogical())}, nil
}

// TestClusterOracleMonotonicAcrossFailover takes timestamps one after
// another while the meta range's leader is killed, twice: each is above
// the one before (real-time order), whichever node issued it.
func TestClusterOracleMonotonicAcrossFailover(t *testing.T) {
	c := newCluster(t, 3)
	var prev hlc.Timestamp
	take := func(n int) uint64 {
		var from uint64
		for i := 0; i < n; i++ {
			ts, id := c.oracleTimestamp(30 * time.Second)
			if !prev.Less(ts) {
				t.Fatalf("node %d issued %s after %s was issued", id, ts, prev)
			}
			prev, from = ts, id
		}
		return from
	}
	for round := 0; round < 2; round++ {
		oracle := take(50)
		leader, _ := c.leader(1, 10*time.Second)
		if leader != oracle {
			t.Fatalf("node %d issued timestamps; meta's leader is node %d", oracle, leader)
		}
		c.node(leader).kill()
		if next := take(50); next == leader {
			t.Fatalf("the killed node %d issued timestamps", leader)
		}
		c.start(leader)
	}
}

// setClockOffset shifts node id's clock (PUT /debug/faults/clock of a
// faults build); 0 puts it back.
func (c *testCluster) setClockOffset(id uint64, off time.Duration) error {
	method, u := http.MethodDelete, "http://"+c.node(id).httpAddr+"/debug/faults/clock"
	if off != 0 {
		method, u = http.MethodPut, u+"?offset="+off.String()
	}
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, u, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// waitMetric waits until node id exports metric name at value.
func (c *testCluster) waitMetric(id uint64, name string, value float64, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := c.metric(id, name)
		if v == value {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d: %s = %v after %v, want %v", id, name, v, timeout, value)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterClockSkewStopsAndResumes sets the clock of the node serving
// as the oracle 2 s back, then (once it is back) 2 s ahead: four times the
// maximum offset. Each time it must report its clock beyond bounds, hand
// the meta range (and the oracle) to another node and refuse to issue,
// while the others go on issuing above everything issued before and the
// skewed node hands out nothing from the future; once its clock is right
// again it reports within bounds by itself.
func TestClusterClockSkewStopsAndResumes(t *testing.T) {
	c := newFaultsCluster(t, 3)
	start := time.Now()
	step := func(what string) { t.Logf("%v: %s", time.Since(start).Round(time.Millisecond), what) }
	_, admin, done := c.raw(1)
	defer done()
	var before hlc.Timestamp
	// take takes a timestamp, which must be above the last one and not
	// from the future (beyond the test's clock plus the maximum offset).
	take := func() uint64 {
		ts, from := c.oracleTimestamp(30 * time.Second)
		if !before.Less(ts) {
			t.Fatalf("node %d issued %s after %s", from, ts, before)
		}
		if limit := time.Now().Add(hlc.DefaultMaxOffset).UnixNano(); ts.WallTime > limit {
			t.Fatalf("node %d issued %s, %v in the future", from, ts, time.Duration(ts.WallTime-time.Now().UnixNano()))
		}
		before = ts
		return from
	}
	for _, tc := range []struct {
		skewed uint64
		off    time.Duration
	}{{3, -2 * time.Second}, {2, 2 * time.Second}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := admin.TransferLeader(ctx, &kvpb.TransferLeaderRequest{RangeId: 1, TargetNodeId: tc.skewed})
		cancel()
		if err != nil {
			t.Fatalf("moving meta to node %d: %v", tc.skewed, err)
		}
		if from := take(); from != tc.skewed {
			t.Fatalf("node %d issued; meta was moved to node %d", from, tc.skewed)
		}
		step(fmt.Sprintf("meta moved to node %d", tc.skewed))
		if err := c.setClockOffset(tc.skewed, tc.off); err != nil {
			t.Fatal(err)
		}
		// It hands meta away and issues nothing meanwhile (nothing from
		// the future either).
		deadline := time.Now().Add(15 * time.Second)
		for take() == tc.skewed {
			if time.Now().After(deadline) {
				t.Fatalf("the skewed node %d still serves as the oracle", tc.skewed)
			}
			time.Sleep(20 * time.Millisecond)
		}
		step(fmt.Sprintf("node %d's clock %v: meta handed away", tc.skewed, tc.off))
		c.waitMetric(tc.skewed, "shale_clock_offset_exceeded", 1, 15*time.Second)
		step("the skewed node reports it")
		for _, cn := range c.all() {
			if cn.id != tc.skewed && c.metric(cn.id, "shale_clock_offset_exceeded") != 0 {
				t.Fatalf("node %d (clock right) reports its clock beyond bounds", cn.id)
			}
		}
		if _, err := c.oracleCall(tc.skewed); err == nil {
			t.Fatalf("the skewed node %d issued a timestamp", tc.skewed)
		}
		if c.metric(tc.skewed, "shale_clock_offset_refusals_total") <= 0 {
			t.Fatalf("node %d refused nothing", tc.skewed)
		}
		if !strings.Contains(c.node(tc.skewed).log(), `"level":"ERROR","msg":"clock offset`) {
			t.Fatalf("node %d did not log its clock offset at error level", tc.skewed)
		}
		// Put right, it serves again by itself.
		if err := c.setClockOffset(tc.skewed, 0); err != nil {
			t.Fatal(err)
		}
		c.waitMetric(tc.skewed, "shale_clock_offset_exceeded", 0, 15*time.Second)
		step("resumed")
		take()
	}
}
