package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests of `shalectl bench` run the real binary against a real cluster
// (and, when etcd is installed, a real etcd), briefly: they check that
// every workload runs without a failed request and that what it reports
// matches what it did, so the tool does not rot. They measure nothing.

// benchReport is the part of `shalectl bench --json` the tests read.
type benchReport struct {
	Target   string `json:"target"`
	Label    string `json:"label"`
	Workload string `json:"workload"`
	Clients  int    `json:"clients"`
	Seconds  float64
	Server   *struct {
		CPUSeconds  float64 `json:"cpu_seconds"`
		WriteBytes  int64   `json:"write_bytes"`
		Device      string  `json:"device"`
		DeviceBytes int64   `json:"device_bytes"`
	} `json:"server"`
	Results []struct {
		Op        string  `json:"op"`
		Ops       int64   `json:"ops"`
		Errors    int64   `json:"errors"`
		Items     int64   `json:"items"`
		Found     int64   `json:"found"`
		OpsPerSec float64 `json:"ops_per_sec"`
		P50Us     int64   `json:"p50_us"`
		P99Us     int64   `json:"p99_us"`
		MaxUs     int64   `json:"max_us"`
	} `json:"results"`
	FirstError string `json:"first_error"`
}

// runBench runs `shalectl bench` with args (plus --json --quiet) and
// returns its report, failing the test on a non-zero exit.
func runBench(t *testing.T, args ...string) benchReport {
	t.Helper()
	_, ctl := binaries(t)
	args = append([]string{"bench"}, append(args, "--json", "--quiet")...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ctl, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("shalectl %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out, stderr.String())
	}
	var rep benchReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("shalectl %v printed no JSON report: %v\n%s", args, err, out)
	}
	return rep
}

// checkReport checks a report's requests: each named op ran, none failed,
// and its latencies are ordered.
func checkReport(t *testing.T, rep benchReport, ops ...string) {
	t.Helper()
	if len(rep.Results) != len(ops) {
		t.Fatalf("%s %s: %d kinds of request, want %v: %+v", rep.Target, rep.Workload, len(rep.Results), ops, rep)
	}
	for i, op := range ops {
		r := rep.Results[i]
		if r.Op != op || r.Ops == 0 || r.Errors != 0 {
			t.Fatalf("%s %s: result %d = %+v, want op %s with requests and no errors (first error %q)",
				rep.Target, rep.Workload, i, r, op, rep.FirstError)
		}
		if r.P50Us <= 0 || r.P50Us > r.P99Us || r.P99Us > r.MaxUs || r.OpsPerSec <= 0 {
			t.Fatalf("%s %s %s: inconsistent figures %+v", rep.Target, rep.Workload, op, r)
		}
	}
}

func TestBenchWorkloadsOnCluster(t *testing.T) {
	c := newCluster(t, 3)
	eps := strings.Join(c.endpoints(), ",")
	base := []string{"--endpoints", eps, "--duration", "1s", "--clients", "4", "--keys", "2000"}
	run := func(args ...string) benchReport {
		return runBench(t, append(append([]string{}, base...), args...)...)
	}

	rep := run("fillseq")
	checkReport(t, rep, "write")
	// fillseq writes keys 0, 1, 2, ... in order: the first is there, with
	// a value of the default size.
	v, found, err := c.client().Get(context.Background(), []byte("0000000000000000"))
	if err != nil || !found || len(v) != 100 {
		t.Fatalf("after fillseq, key 0: %d bytes, found %v, err %v; want 100 bytes", len(v), found, err)
	}

	checkReport(t, run("put"), "write")

	// Loaded reads find every key they ask for.
	for _, args := range [][]string{
		{"get", "--load"},
		{"readrandom", "--stale"},
		{"multiget", "--batch-size", "16"},
	} {
		rep := run(args...)
		op := "read"
		if args[0] == "multiget" {
			op = "multiget"
		}
		checkReport(t, rep, op)
		r := rep.Results[0]
		if r.Found != r.Items {
			t.Errorf("%v on a loaded key space: found %d of %d keys", args, r.Found, r.Items)
		}
		if args[0] == "multiget" && r.Items != 16*r.Ops {
			t.Errorf("multiget --batch-size 16: %d keys in %d requests", r.Items, r.Ops)
		}
	}

	rep = run("readseq", "--batch-size", "50")
	checkReport(t, rep, "scan")
	if r := rep.Results[0]; r.Items == 0 || r.Items > 50*r.Ops {
		t.Errorf("readseq --batch-size 50: %d entries in %d scans", r.Items, r.Ops)
	}

	checkReport(t, run("ycsb-a"), "write", "read")
	checkReport(t, run("ycsb-b"), "write", "read")
	checkReport(t, run("readwhilewriting"), "write", "read")

	// dirwalk checks every directory it finds against the tree it loaded;
	// a walk is dir-depth lookups.
	rep = run("dirwalk", "--dir-fanout", "5", "--dir-depth", "3")
	checkReport(t, rep, "walk")
	if r := rep.Results[0]; r.Items != 3*r.Ops || r.Found != r.Items {
		t.Errorf("dirwalk depth 3: %d lookups (%d found) in %d walks", r.Items, r.Found, r.Ops)
	}
}

// TestBenchLeasesOnCluster: the leases workload grants its leases, then
// renews each every third of its TTL: about keys*3/TTL keep-alives a
// second, none failing.
func TestBenchLeasesOnCluster(t *testing.T) {
	c := newCluster(t, 3)
	eps := strings.Join(c.endpoints(), ",")
	rep := runBench(t, "leases", "--endpoints", eps, "--duration", "4s", "--clients", "4", "--keys", "60")
	checkReport(t, rep, "keepalive")
	// 60 leases renewed every 10s/3: 18 a second, at most 4s of them
	// plus each lease's first turn.
	if r := rep.Results[0]; r.Ops > 60+18*5 || r.Items != r.Ops {
		t.Errorf("leases: %d keep-alives (%d items) in 4s, want at most %d", r.Ops, r.Items, 60+18*5)
	}
	ls, err := c.client().Leases(context.Background())
	if err != nil || len(ls) != 60 {
		t.Fatalf("after the run: %d leases, %v; want the 60 granted", len(ls), err)
	}
}

func TestBenchRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "nosuchworkload"},
		{"bench", "put", "--keys", "100000", "--key-size", "3"},
		{"bench", "put", "--target", "redis://127.0.0.1:1"},
		{"bench-compare", "only-one.json"},
	} {
		_, stderr, code := runCtl(t, "127.0.0.1:1", args...)
		if code == 0 || !strings.Contains(stderr, "shalectl:") {
			t.Errorf("shalectl %v: exit %d, stderr %q; want a failure with a message", args, code, stderr)
		}
	}
}

// TestBenchAgainstEtcd drives a one-member etcd with the same tool, and
// compares the two reports, as scripts/bench-vs-etcd does.
func TestBenchAgainstEtcd(t *testing.T) {
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd is not installed (scripts/deps --bench installs it)")
	}
	dir := t.TempDir()
	// etcd binds its ports itself: held ones (see clusterharness.Port),
	// which no other process's port-0 bind can take meanwhile.
	clientAddr := reserveAddr(t, "127.0.0.1")
	peerURL := "http://" + reserveAddr(t, "127.0.0.1")
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(etcdBin, "--name", "e1", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", "http://"+clientAddr, "--advertise-client-urls", "http://"+clientAddr,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "e1="+peerURL)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	target := "etcd://" + clientAddr
	common := []string{"--target", target, "--duration", "1s", "--clients", "4", "--keys", "1000", "--op-timeout", "20s"}
	// The put run watches the etcd process, as scripts/bench-vs-etcd
	// does: a server that took writes spent CPU and wrote bytes.
	put := runBench(t, append([]string{"put", "--label", "etcd 3.x", "--server-pids", strconv.Itoa(cmd.Process.Pid), "--server-dir", dir}, common...)...)
	checkReport(t, put, "write")
	if put.Target != "etcd" || put.Label != "etcd 3.x" {
		t.Fatalf("target %q, label %q; want etcd, etcd 3.x", put.Target, put.Label)
	}
	if s := put.Server; s == nil || s.CPUSeconds <= 0 || s.WriteBytes <= 0 || (s.Device != "" && s.DeviceBytes <= 0) {
		t.Errorf("etcd took %d puts; its usage: %+v", put.Results[0].Ops, s)
	}
	get := runBench(t, append([]string{"multiget", "--load", "--batch-size", "8"}, common...)...)
	checkReport(t, get, "multiget")
	if r := get.Results[0]; r.Found != r.Items || r.Items != 8*r.Ops {
		t.Errorf("etcd multiget on a loaded key space: found %d of %d keys in %d requests", r.Found, r.Items, r.Ops)
	}

	// bench-compare reads reports back and compares the two systems (here
	// the same etcd run, once relabelled as shale).
	pa, pb := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	relabelled := put
	relabelled.Target, relabelled.Label = "shale", ""
	for p, r := range map[string]benchReport{pa: relabelled, pb: put} {
		b, _ := json.Marshal(r)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, code := runCtl(t, "127.0.0.1:1", "bench-compare", pa, pb)
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("| put | %d | 1 | write ops/s |", put.Clients)) || !strings.Contains(stdout, "1.00×") {
		t.Errorf("bench-compare: exit %d\n%s%s", code, stdout, stderr)
	}
}
