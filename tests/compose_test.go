package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// composeAvailable says why the Compose smoke test cannot run here, or "".
// (make test prints the same reason; `go test` shows it with -v.)
func composeAvailable() string {
	if os.Getenv("SHALE_SKIP_COMPOSE") != "" {
		return "SHALE_SKIP_COMPOSE is set"
	}
	if _, err := exec.LookPath("docker"); err != nil {
		return "no docker command"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info").CombinedOutput(); err != nil {
		return "no Docker engine (docker info: " + strings.TrimSpace(lastLine(string(out))) + ")"
	}
	if exec.Command("docker", "compose", "version").Run() != nil {
		if _, err := exec.LookPath("docker-compose"); err != nil {
			return "neither docker compose nor docker-compose is installed"
		}
	}
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// composeCluster is the cluster of deploy/docker-compose.yml, brought up
// through scripts/compose under a project and ports of its own.
type composeCluster struct {
	t     *testing.T
	env   []string
	grpc  [3]string // published gRPC address of shale1..3
	http  [3]string
	image string
}

func (c *composeCluster) run(timeout time.Duration, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repoRootPath(), "scripts", "compose"), args...)
	cmd.Env = c.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("scripts/compose %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// TestComposeSmoke builds the image, brings up the 3-node Compose cluster,
// writes and reads through the client, stops one container while writes
// go on, brings it back, checks that it caught up (a stale read of its own
// replica returns every key written while it was down), and checks that
// the key series on /metrics exist and moved.
func TestComposeSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the Compose smoke test builds an image and starts containers")
	}
	if why := composeAvailable(); why != "" {
		t.Skip("Compose smoke test skipped: " + why)
	}
	root := repoRootPath()
	suffix := strconv.Itoa(os.Getpid())
	c := &composeCluster{t: t, image: "shale:smoke-" + suffix}
	c.env = append(os.Environ(), "COMPOSE_PROJECT_NAME=shalesmoke"+suffix, "SHALE_IMAGE="+c.image,
		"SHALE_NODES=3", "SHALE_COMPOSE_WAIT=120")
	for i := range 3 {
		// Docker publishes the ports itself: held ones (see
		// clusterharness.Port), which no other process's port-0 bind can
		// take meanwhile.
		g, h := reservePort(t, "127.0.0.1"), reservePort(t, "127.0.0.1")
		c.grpc[i], c.http[i] = g.Addr(), h.Addr()
		c.env = append(c.env, fmt.Sprintf("SHALE%d_GRPC_PORT=%s", i+1, portOf(g.Addr())), fmt.Sprintf("SHALE%d_HTTP_PORT=%s", i+1, portOf(h.Addr())))
	}

	start := time.Now()
	build := exec.Command("make", "--no-print-directory", "-C", root, "image", "IMAGE="+c.image)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, tail(string(out), 30))
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", c.image).Run() })
	t.Logf("image built in %v", time.Since(start).Round(time.Second))

	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "compose"), "logs", "--tail", "40")
			cmd.Env = c.env
			out, _ := cmd.CombinedOutput()
			t.Logf("container logs:\n%s", out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "compose"), "clean")
		cmd.Env = c.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("compose clean: %v\n%s", err, out)
		}
	})
	c.run(3*time.Minute, "up")
	t.Logf("cluster healthy %v after start", time.Since(start).Round(time.Second))

	// Nodes 1 and 2 are never stopped: between them they hold the
	// leaders while node 3 is down, so their sums must move. (The
	// routing client sends requests to leaders, which may be any node.)
	sum12 := func() map[string]float64 {
		m := c.scrape(0)
		for k, v := range c.scrape(1) {
			m[k] += v
		}
		return m
	}
	before := sum12()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, c.grpc[:], &client.Options{RequestTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	write := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			k, v := fmt.Sprintf("%s/%03d", prefix, i), fmt.Sprintf("v-%s-%d", prefix, i)
			if err := cl.Put(ctx, []byte(k), []byte(v)); err != nil {
				t.Fatalf("put %s: %v", k, err)
			}
		}
	}
	write("before", 50)
	if v, found, err := cl.Get(ctx, []byte("before/049")); err != nil || !found || string(v) != "v-before-49" {
		t.Fatalf("get before/049 = %q %v %v", v, found, err)
	}

	// Node 3 goes away (a graceful docker stop: SIGTERM); writes go on
	// through the other two.
	c.run(time.Minute, "stop", "shale3")
	write("during", 100)
	c.run(time.Minute, "start", "shale3")

	// Caught up: node 3's own replica (a stale read, no leader involved)
	// has the last key written while it was down.
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, found, err := staleGetAt(c.grpc[2], "during/099")
		if err == nil && found && v == "v-during-99" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 3 did not catch up within 60s: stale get = %q found=%v err=%v", v, found, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	for i := 0; i < 100; i += 33 {
		k := fmt.Sprintf("during/%03d", i)
		if v, found, err := staleGetAt(c.grpc[2], k); err != nil || !found || v != fmt.Sprintf("v-during-%d", i) {
			t.Fatalf("node 3's replica: %s = %q found=%v err=%v", k, v, found, err)
		}
	}

	// The key series exist on every node and moved on nodes 1 and 2.
	after := sum12()
	for _, name := range []string{
		"shale_engine_user_bytes_written_total", "shale_raft_proposals_total", "shale_raft_entries_applied_total",
		"grpc_server_handled_total", "shale_raft_commit_latency_seconds_count",
	} {
		if after[name] <= before[name] {
			t.Errorf("nodes 1 and 2: %s did not move: %v -> %v", name, before[name], after[name])
		}
	}
	for i := range 3 {
		m := c.scrape(i)
		for _, name := range []string{"shale_ranges", "shale_ranges_unavailable", "shale_engine_write_amplification",
			"shale_range_applied_index", "go_goroutines", "process_resident_memory_bytes"} {
			if _, ok := m[name]; !ok {
				t.Errorf("node %d: /metrics lacks %s", i+1, name)
			}
		}
		if m["shale_ranges"] < 2 {
			t.Errorf("node %d: shale_ranges = %v, want every range", i+1, m["shale_ranges"])
		}
	}
	t.Logf("smoke test done in %v", time.Since(start).Round(time.Second))
}

// scrape sums each series of node i's /metrics by name (all label sets).
func (c *composeCluster) scrape(i int) map[string]float64 {
	c.t.Helper()
	resp, err := http.Get("http://" + c.http[i] + "/metrics")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if j := strings.IndexByte(line, '{'); j >= 0 && j < len(name) {
			name = line[:j]
			rest = line[strings.LastIndexByte(line, '}')+2:]
		}
		if v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64); err == nil {
			out[name] += v
		}
	}
	return out
}

// staleGetAt reads key from the replica of the node at addr itself.
func staleGetAt(addr, key string) (string, bool, error) {
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", false, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := kvpb.NewKVClient(cc).Get(ctx, &kvpb.GetRequest{Key: []byte(key),
		Header: &kvpb.RequestHeader{ReadConsistency: kvpb.ReadConsistency_READ_CONSISTENCY_STALE}})
	if err != nil {
		return "", false, err
	}
	return string(resp.GetValue()), resp.GetFound(), nil
}

// portOf is the port of a host:port address.
func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}
