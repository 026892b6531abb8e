package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShalectlValueFromStdinAndFile puts a 1 MiB binary value through
// `shalectl put KEY -` and another through --file, and reads both back
// byte for byte with get --raw.
func TestShalectlValueFromStdinAndFile(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ep := node.grpcAddr
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>8) // every byte value, not text
	}
	out, errOut, code := runCtlInput(t, ep, big, "put", "blob", "-")
	if code != 0 || out != "OK\n" {
		t.Fatalf("put blob - < 1 MiB: %q exit %d: %s", out, code, errOut)
	}
	out, errOut, code = runCtl(t, ep, "get", "--raw", "blob")
	if code != 0 || !bytes.Equal([]byte(out), big) {
		t.Fatalf("get --raw blob: %d bytes (exit %d, %s), want the 1 MiB put", len(out), code, errOut)
	}
	// --stale reads the same value from any replica.
	out, _, code = runCtl(t, ep, "get", "--stale", "--raw", "blob")
	if code != 0 || !bytes.Equal([]byte(out), big) {
		t.Fatalf("get --stale --raw blob: %d bytes, exit %d", len(out), code)
	}

	path := filepath.Join(t.TempDir(), "v")
	if err := os.WriteFile(path, []byte{0, 1, 2, 0xff}, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code = runCtl(t, ep, "put", "small", "--file", path); code != 0 {
		t.Fatalf("put --file: %q exit %d: %s", out, code, errOut)
	}
	if out, _, _ = runCtl(t, ep, "--hex", "get", "736d616c6c"); out != "000102ff\n" {
		t.Fatalf("--hex get small = %q, want 000102ff", out)
	}
	// Versions follow (shalectl_versions_test.go).
	if out, _, _ = runCtl(t, ep, "get", "--json", "small"); !strings.HasPrefix(out, `{"key":"small","valueBase64":"AAEC/w==","found":true,"version":`) {
		t.Fatalf("get --json small = %q", out)
	}
	if out, _, _ = runCtl(t, ep, "--hex", "--json", "get", "736d616c6c"); !strings.HasPrefix(out, `{"keyHex":"736d616c6c","valueHex":"000102ff","found":true,"version":`) {
		t.Fatalf("--hex --json get small = %q", out)
	}
	if out, _, _ = runCtl(t, ep, "scan", "--stale", "--keys-only"); out != "blob\nsmall\n" {
		t.Fatalf("scan --stale --keys-only = %q", out)
	}

	// A value and --file together, or no value at all, is refused.
	if _, errOut, code = runCtl(t, ep, "put", "k", "v", "--file", path); code == 0 || !strings.Contains(errOut, "not both") {
		t.Fatalf("put with VALUE and --file: exit %d, %q", code, errOut)
	}
	if _, errOut, code = runCtl(t, ep, "put", "k"); code == 0 || !strings.Contains(errOut, "missing VALUE") {
		t.Fatalf("put without a value: exit %d, %q", code, errOut)
	}
}

// TestShalectlHexAndJSONLayout checks that split and ranges follow --hex
// and that admin --json prints numbers as numbers and keys by the one
// layout rule.
func TestShalectlHexAndJSONLayout(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ep := node.grpcAddr
	out, errOut, code := runCtl(t, ep, "--hex", "split", "00ff")
	if code != 0 || !strings.Contains(out, "00ff)") || strings.Contains(out, `\x`) {
		t.Fatalf("--hex split 00ff = %q exit %d %s: want the bound in hex", out, code, errOut)
	}
	out, _, code = runCtl(t, ep, "--hex", "ranges")
	if code != 0 || !strings.Contains(out, "[00ff, +inf)") {
		t.Fatalf("--hex ranges = %q: want the span [00ff, +inf)", out)
	}
	out, _, code = runCtl(t, ep, "--json", "ranges")
	var rs struct {
		Ranges []map[string]any `json:"ranges"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rs) != nil || len(rs.Ranges) < 2 {
		t.Fatalf("ranges --json = %q exit %d", out, code)
	}
	var found bool
	for _, r := range rs.Ranges {
		d := r["descriptor"].(map[string]any)
		if _, ok := d["rangeId"].(float64); !ok {
			t.Fatalf("rangeId %v is not a JSON number in %s", d["rangeId"], out)
		}
		if d["startKeyBase64"] == "AP8=" {
			found = true
		}
		if _, ok := d["startKey"].(string); !ok && d["startKeyBase64"] == nil {
			t.Fatalf("range %v has neither startKey nor startKeyBase64", d)
		}
	}
	if !found {
		t.Fatalf("ranges --json: no range starts at startKeyBase64 AP8=: %s", out)
	}
	out, _, _ = runCtl(t, ep, "--json", "--hex", "split", "0100")
	var sp map[string]map[string]any
	if err := json.Unmarshal([]byte(out), &sp); err != nil || sp["right"]["startKeyHex"] != "0100" {
		t.Fatalf("--json --hex split 0100 = %q (%v)", out, err)
	}
	out, _, _ = runCtl(t, ep, "--json", "nodes")
	var ns struct {
		Nodes []struct {
			Node struct {
				NodeID any `json:"nodeId"`
			} `json:"node"`
			State string `json:"state"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &ns); err != nil || len(ns.Nodes) != 1 {
		t.Fatalf("nodes --json = %q (%v)", out, err)
	}
	if id, ok := ns.Nodes[0].Node.NodeID.(float64); !ok || id != 1 || ns.Nodes[0].State != "live" {
		t.Fatalf("nodes --json: nodeId %#v state %q, want the number 1 and live", ns.Nodes[0].Node.NodeID, ns.Nodes[0].State)
	}
}
