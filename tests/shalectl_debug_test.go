package tests

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestShalectlDebugAndJSON drives shalectl's debug, health and completion
// commands and the --json forms of the read commands against a real node.
func TestShalectlDebugAndJSON(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ep := node.grpcAddr
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := runCtl(t, ep, args...)
		if code != 0 {
			t.Fatalf("shalectl %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	asJSON := func(args ...string) map[string]any {
		t.Helper()
		out := run(append([]string{"--json"}, args...)...)
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("shalectl --json %v printed %q: %v", args, out, err)
		}
		return m
	}
	if out := run("--json", "put", "k", "v"); !strings.HasPrefix(out, `{"ok":true,"version":`) {
		t.Fatalf("put --json = %q", out)
	}

	if out := run("debug", "engine-stats"); !strings.Contains(out, "write amplification") || !strings.Contains(out, "user bytes written") {
		t.Fatalf("debug engine-stats:\n%s", out)
	}
	es := asJSON("debug", "engine-stats")
	eng, _ := es["engine"].(map[string]any)
	if n, ok := eng["userBytesWritten"].(float64); !ok || n == 0 || es["nodeId"] != float64(1) {
		t.Fatalf("debug engine-stats --json = %v", es)
	}

	if out := run("debug", "range", "2"); !strings.Contains(out, "generation") || !strings.Contains(out, "leader") || !strings.Contains(out, ep) {
		t.Fatalf("debug range 2:\n%s", out)
	}
	if out := run("debug", "raft", "2"); !strings.Contains(out, "APPLIED") || !strings.Contains(out, "leader") {
		t.Fatalf("debug raft 2:\n%s", out)
	}
	rr := asJSON("debug", "raft", "2")
	reps, _ := rr["replicas"].([]any)
	if len(reps) != 1 {
		t.Fatalf("debug raft 2 --json replicas = %v", rr)
	}
	st, _ := reps[0].(map[string]any)["status"].(map[string]any)
	if raft, _ := st["raft"].(map[string]any); raft["state"] != "leader" {
		t.Fatalf("debug raft 2 --json: replica status %v", st)
	}
	_, errOut, code := runCtl(t, ep, "debug", "range", "99")
	if code != 1 || !strings.Contains(errOut, "range 99 does not exist (ranges: 1, 2)") {
		t.Fatalf("debug range 99: exit %d, %q", code, errOut)
	}
	_, errOut, code = runCtl(t, ep, "debug", "raft", "x")
	if code != 1 || !strings.Contains(errOut, `range ID "x"`) {
		t.Fatalf("debug raft x: exit %d, %q", code, errOut)
	}

	cs := asJSON("status")
	if cs["clusterId"] == "" || cs["nodes"] == nil || cs["ranges"] == nil || cs["reached"] == nil {
		t.Fatalf("status --json = %v", cs)
	}
	if ns := asJSON("status", "--node"); ns["clusterId"] != cs["clusterId"] || ns["ranges"] == nil {
		t.Fatalf("status --node --json = %v", ns)
	}

	if out := run("health"); out != "ok\n" {
		t.Fatalf("health = %q", out)
	}
	if h := asJSON("health", "--http", node.httpAddr); h["healthy"] != true {
		t.Fatalf("health --http --json = %v", h)
	}
	if out := run("completion", "bash"); !strings.Contains(out, "shalectl") {
		t.Fatalf("completion bash printed %d bytes", len(out))
	}

	node.stop()
	_, errOut, code = runCtl(t, ep, "--timeout", "2s", "health", "--http", node.httpAddr)
	if code != 1 || !strings.Contains(errOut, node.httpAddr) {
		t.Fatalf("health --http of a stopped node: exit %d, %q", code, errOut)
	}
	_, errOut, code = runCtl(t, ep, "--timeout", "2s", "debug", "engine-stats")
	if code != 1 || !strings.Contains(errOut, ep) {
		t.Fatalf("debug engine-stats of a stopped node: exit %d, %q (want it to name %s)", code, errOut, ep)
	}
}
