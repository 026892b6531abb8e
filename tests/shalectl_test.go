package tests

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShalectl drives the CLI against a real node.
func TestShalectl(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ep := node.grpcAddr
	mustRun := func(want string, args ...string) {
		t.Helper()
		out, errOut, code := runCtl(t, ep, args...)
		if code != 0 || out != want {
			t.Fatalf("shalectl %v = %q (exit %d, stderr %q), want %q", args, out, code, errOut, want)
		}
	}
	mustRun("OK\n", "put", "fruit/apple", "red")
	mustRun("OK\n", "put", "fruit/banana", "yellow")
	mustRun("OK\n", "put", "veg/kale", "green")
	mustRun("OK\n", "--hex", "put", "00ff", "0102")
	mustRun("red\n", "get", "fruit/apple")
	mustRun("fruit/apple\tred\nfruit/banana\tyellow\n", "scan", "fruit/", "fruit0")
	mustRun("veg/kale\n", "scan", "--reverse", "--keys-only", "--limit", "1")
	mustRun("\"\\x00\\xff\"\t\"\\x01\\x02\"\n", "scan", "", "a")
	mustRun("0102\n", "--hex", "get", "00ff")
	if out, _, _ := runCtl(t, ep, "get", "--json", "fruit/apple"); !strings.HasPrefix(out, `{"key":"fruit/apple","value":"red","found":true,"version":`) {
		t.Fatalf("get --json fruit/apple = %q", out)
	}
	mustRun("OK\n", "del", "fruit/apple")
	mustRun("OK\n", "del", "fruit/", "--range-end", "fruit0")

	out, errOut, code := runCtl(t, ep, "get", "fruit/banana")
	if code != 1 || out != "" || !strings.Contains(errOut, "not found") {
		t.Fatalf("get of a deleted key: %q %q exit %d", out, errOut, code)
	}
	out, _, code = runCtl(t, ep, "scan", "--json")
	if code != 0 {
		t.Fatalf("scan --json exit %d", code)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	var rows []map[string]any
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("scan --json line %q: %v", sc.Text(), err)
		}
		rows = append(rows, row)
	}
	if len(rows) != 2 || rows[0]["keyBase64"] != "AP8=" || rows[1]["key"] != "veg/kale" {
		t.Fatalf("scan --json rows = %v", rows)
	}
	out, _, code = runCtl(t, ep, "status")
	if code != 0 || !strings.Contains(out, "node") || !strings.Contains(out, ep) {
		t.Fatalf("status = %q exit %d", out, code)
	}
	out, _, code = runCtl(t, ep, "status", "--json")
	var st map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st["clusterId"] == "" {
		t.Fatalf("status --json = %q exit %d", out, code)
	}
	_, errOut, code = runCtl(t, ep, "put", "onlykey")
	if code == 0 || !strings.Contains(errOut, "missing VALUE") {
		t.Fatalf("put with one argument: exit %d, %q", code, errOut)
	}
	node.stop()
	_, errOut, code = runCtl(t, ep, "--timeout", "2s", "get", "x")
	if code != 1 || !strings.Contains(errOut, ep) {
		t.Fatalf("get against a stopped node: exit %d, stderr %q (want it to name %s)", code, errOut, ep)
	}
}

// TestReadmeQuickStart runs the shalectl lines of the README's quick start
// verbatim (with SHALE_ENDPOINTS pointing at the test's node) and checks
// each against the output the README shows for it.
func TestReadmeQuickStart(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRootPath(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := quickStartBlock(t, string(readme))
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	var cmds int
	lines := strings.Split(block, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(line, "$ bin/shalectl ") {
			continue
		}
		var want []string
		for j := i + 1; j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "$ "); j++ {
			if s := strings.TrimSpace(lines[j]); s != "" {
				want = append(want, s)
			}
		}
		args := strings.Fields(strings.TrimPrefix(line, "$ bin/shalectl "))
		out, errOut, code := runCtl(t, node.grpcAddr, args...)
		if code != 0 {
			t.Fatalf("README: %s: exit %d: %s", line, code, errOut)
		}
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if s := strings.TrimSpace(l); s != "" {
				got = append(got, strings.Join(strings.Fields(s), " "))
			}
		}
		for k := range want {
			want[k] = strings.Join(strings.Fields(want[k]), " ")
		}
		// status prints live figures; its README lines are illustrative.
		if args[0] != "status" && strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("README: %s printed\n%s\nbut the README shows\n%s", line, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		cmds++
	}
	if cmds < 4 {
		t.Fatalf("the README quick start has %d shalectl commands", cmds)
	}
	node.stop()
}

// quickStartBlock returns the first fenced block after the "Quick start"
// heading.
func quickStartBlock(t *testing.T, readme string) string {
	i := strings.Index(readme, "## Quick start")
	if i < 0 {
		t.Fatal("README.md has no '## Quick start' section")
	}
	rest := readme[i:]
	start := strings.Index(rest, "```")
	if start < 0 {
		t.Fatal("quick start has no code block")
	}
	rest = rest[start+3:]
	rest = rest[strings.Index(rest, "\n")+1:]
	end := strings.Index(rest, "```")
	if end < 0 {
		t.Fatal("quick start code block is not closed")
	}
	return rest[:end]
}
