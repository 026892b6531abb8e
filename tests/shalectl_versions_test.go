package tests

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shaledb/shale/client"
)

// TestShalectlVersions: writes print their version with --json, get and
// scan --at read as of it, --versions prints versions readably and --at
// reads that form back; a malformed --at is refused before anything is
// sent.
func TestShalectlVersions(t *testing.T) {
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
	// version reads the "version" of a --json answer.
	version := func(out string) (client.Timestamp, bool) {
		t.Helper()
		var m struct {
			Version *struct {
				WallNanos int64 `json:"wallNanos"`
				Logical   int32 `json:"logical"`
			} `json:"version"`
		}
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("--json printed %q: %v", out, err)
		}
		if m.Version == nil {
			return client.Timestamp{}, false
		}
		return client.Timestamp{WallTime: m.Version.WallNanos, Logical: m.Version.Logical}, true
	}

	// Bad input first: nothing is sent, nothing changes.
	for _, bad := range []string{"yesterday", "-1", "12,x", "0"} {
		_, errOut, code := runCtl(t, ep, "get", "--at", bad, "k")
		if code == 0 || !strings.Contains(errOut, "--at") {
			t.Errorf("get --at %q: exit %d, stderr %q; want a refusal naming --at", bad, code, errOut)
		}
	}
	if _, errOut, code := runCtl(t, ep, "get", "--at", "5", "--stale", "k"); code == 0 || !strings.Contains(errOut, "--stale") {
		t.Errorf("get --at --stale: exit %d, stderr %q", code, errOut)
	}

	v1, ok := version(run("--json", "put", "k/a", "one"))
	if !ok {
		t.Skip("skipping: the node reports no versions yet (the server side of issue 19 has not landed)")
	}
	run("put", "k/b", "bee")
	v2, _ := version(run("--json", "put", "k/a", "two"))
	if !v1.Less(v2) {
		t.Fatalf("second write's version %v is not above the first's %v", v2, v1)
	}
	if out := run("get", "k/a"); out != "two\n" {
		t.Fatalf("get k/a = %q", out)
	}
	// As of the first write, in both accepted forms.
	for _, at := range []string{v1.String(), client.FormatTimestamp(v1)} {
		if out := run("get", "--at", at, "k/a"); out != "one\n" {
			t.Errorf("get --at %s k/a = %q, want one", at, out)
		}
		// k/b was written after v1: absent as of v1.
		if out, _, code := runCtl(t, ep, "get", "--at", at, "k/b"); code != 1 || out != "" {
			t.Errorf("get --at %s k/b = %q exit %d, want not found", at, out, code)
		}
		if out := run("scan", "--at", at, "k/", "k0"); out != "k/a\tone\n" {
			t.Errorf("scan --at %s = %q", at, out)
		}
	}
	// --versions prints the RFC 3339 form, which --at takes back.
	out := run("get", "--versions", "k/a")
	val, ts, _ := strings.Cut(strings.TrimSuffix(out, "\n"), "\t")
	if got, err := client.ParseTimestamp(ts); val != "two" || err != nil || got != v2 {
		t.Fatalf("get --versions = %q: version %v (%v), want %v", out, got, err, v2)
	}
	if out := run("scan", "--versions", "k/", "k0"); !strings.HasPrefix(out, fmt.Sprintf("k/a\ttwo\t%s\n", client.FormatTimestamp(v2))) {
		t.Fatalf("scan --versions = %q", out)
	}
	// --json: a scan entry carries its versions; get the read timestamp.
	line := strings.SplitN(run("--json", "scan", "k/", "k0"), "\n", 2)[0]
	if got, ok := version(line); !ok || got != v2 {
		t.Fatalf("scan --json first entry %q: version %v", line, got)
	}
	var g map[string]any
	if err := json.Unmarshal([]byte(run("--json", "get", "k/a")), &g); err != nil || g["createVersion"] == nil || g["readTimestamp"] == nil {
		t.Fatalf("get --json = %v (%v): want createVersion and readTimestamp", g, err)
	}
}
