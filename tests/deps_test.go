package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// This file enforces the dependency rules of docs/architecture.md (after
// etcd's .gomodguard.yaml and Pebble's TestForbiddenImports): imports point
// one way, client -> api and node -> {raft, rangesm} -> storage -> engine-c,
// and only storage crosses into C. Replication (raft/) and the range state
// machine (rangesm/) meet in one interface, raft/apply, and share only the
// command format below both, command/ (TestLayers).

const module = "github.com/shaledb/shale"

type goPackage struct {
	ImportPath string
	Standard   bool
	CgoFiles   []string
	Imports    []string
	Deps       []string
}

// listPackages runs `go list -json` with the given arguments.
func listPackages(t *testing.T, args ...string) []goPackage {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate source file")
	}
	return filepath.Dir(filepath.Dir(file))
}

// rel returns a package path relative to the module ("" for outside it).
func rel(importPath string) string {
	if importPath == module {
		return "."
	}
	if strings.HasPrefix(importPath, module+"/") {
		return strings.TrimPrefix(importPath, module+"/")
	}
	return ""
}

func topDir(r string) string {
	if i := strings.IndexByte(r, '/'); i >= 0 {
		return r[:i]
	}
	return r
}

// allowed lists, per top-level directory, which of the module's top-level
// directories its packages may import. Directories not listed may import
// anything in the module (tests).
var allowed = map[string][]string{
	"api":      {"api"},
	"internal": {"internal"},
	"storage":  {"storage", "internal"},
	"hlc":      {"hlc"},
	"mvcc":     {"mvcc", "hlc", "storage", "internal"},
	// command is the replicated command format: what proposers put in
	// Raft logs and the state machine applies. It sits below both.
	"command": {"command", "api", "hlc"},
	"raft":    {"raft", "command", "storage", "mvcc", "hlc", "api", "internal"},
	"rangesm": {"rangesm", "raft", "command", "storage", "mvcc", "hlc", "api", "internal"}, // of raft only stateMachineMayImport
	"tso":     {"tso", "hlc"},
	"node":    {"node", "raft", "rangesm", "command", "storage", "mvcc", "hlc", "tso", "api", "internal"},
	// client shares the timestamp type with the nodes (client.Timestamp
	// is hlc.Timestamp): one definition of its order and encoding on both
	// sides of the wire; hlc is standard library only.
	"client": {"client", "api", "hlc"},
	"cmd":    {"cmd", "node", "client", "api", "internal"},
}

func TestForbiddenImports(t *testing.T) {
	for _, p := range listPackages(t, "./...") {
		from := rel(p.ImportPath)
		dir := topDir(from)
		ok, restricted := allowed[dir]
		if !restricted {
			continue
		}
		for _, imp := range p.Imports {
			to := rel(imp)
			if to == "" {
				continue
			}
			if !contains(ok, topDir(to)) {
				t.Errorf("%s imports %s: %s/ may import only %v of this module", from, to, dir, ok)
			}
			// shalectl is an ordinary client application: it reaches the
			// cluster through client/ and api/ only, never node/.
			if strings.HasPrefix(from, "cmd/shalectl") && topDir(to) == "node" {
				t.Errorf("%s imports %s: shalectl must use client/ and api/ only", from, to)
			}
			if strings.HasPrefix(from, "cmd/shale") && !strings.HasPrefix(from, "cmd/shalectl") && topDir(to) == "client" {
				t.Errorf("%s imports %s: the server binary must not depend on the client library", from, to)
			}
		}
	}
}

// stateMachineMayImport are the replication packages the range state machine
// may import: the interface between the layers and the leaf packages of the
// engine keyspace (neither reaches the network nor runs Raft).
var stateMachineMayImport = map[string]bool{"raft/apply": true, "raft/keys": true, "raft/logstore": true}

// TestLayers: the range state machine (rangesm/) builds no transport, gRPC
// or replication into itself, and replication (raft/) depends on no state
// machine package, directly or through another package; they meet in
// raft/apply, and share the command format (command/), which depends on
// neither.
func TestLayers(t *testing.T) {
	pkgs := listPackages(t, "./rangesm/...", "./raft/...", "./command/...")
	if len(pkgs) < 6 {
		t.Fatalf("go list found %d packages under rangesm/, raft/ and command/", len(pkgs))
	}
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		for _, imp := range p.Imports {
			to := rel(imp)
			if topDir(from) == "rangesm" && topDir(to) == "raft" && !stateMachineMayImport[to] {
				t.Errorf("%s imports %s: the state machine may import only %v of raft/", from, to, sortedKeys(stateMachineMayImport))
			}
		}
		if topDir(from) == "raft" || topDir(from) == "command" {
			for _, dep := range p.Deps {
				to := rel(dep)
				if topDir(to) == "rangesm" {
					t.Errorf("%s depends on %s: replication and the command format depend on no state machine package", from, to)
				}
				if topDir(from) == "command" && topDir(to) == "raft" {
					t.Errorf("%s depends on %s: the command format is below replication", from, to)
				}
			}
		}
		if topDir(from) != "rangesm" {
			continue
		}
		// api/kvpb's generated service stubs link gRPC into anything that
		// uses its message types (descriptors), so gRPC is checked among
		// the direct imports only.
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "google.golang.org/grpc") {
				t.Errorf("%s imports %s: the state machine must not reach the network", from, imp)
			}
		}
		for _, dep := range p.Deps {
			if dep == module+"/raft/transport" || dep == module+"/raft" {
				t.Errorf("%s depends on %s: the state machine must not reach the network or replication", from, dep)
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestClientPullsInNoServerOrCgo: an application importing client/ must not
// build the server, the engine or any cgo code into its binary.
func TestClientPullsInNoServerOrCgo(t *testing.T) {
	pkgs := listPackages(t, "-deps", "./client/...")
	if len(pkgs) == 0 {
		t.Fatal("go list returned no packages for ./client/...")
	}
	for _, p := range pkgs {
		r := rel(p.ImportPath)
		if r != "" {
			switch topDir(r) {
			case "client", "api", "hlc":
			default:
				t.Errorf("client depends on %s", p.ImportPath)
			}
		}
		// Standard packages such as net carry optional cgo files (the system
		// resolver); they build without cgo. Anything else with cgo is out.
		if !p.Standard && len(p.CgoFiles) > 0 {
			t.Errorf("client depends on cgo package %s", p.ImportPath)
		}
	}
}

// TestOnlyStorageUsesCgo: storage/ is the one package that crosses into C.
func TestOnlyStorageUsesCgo(t *testing.T) {
	sawStorage := false
	for _, p := range listPackages(t, "./...") {
		r := rel(p.ImportPath)
		if len(p.CgoFiles) == 0 {
			continue
		}
		if r == "storage" {
			sawStorage = true
			continue
		}
		t.Errorf("%s has cgo files %v: only storage/ may use cgo", r, p.CgoFiles)
	}
	if !sawStorage {
		t.Error("storage/ has no cgo files: the engine binding is missing")
	}
}

// TestEngineHeaderIsSelfContained: engine.h includes only <stddef.h> and
// <stdint.h>, so any C or cgo user can include it.
func TestEngineHeaderIsSelfContained(t *testing.T) {
	path := filepath.Join(repoRoot(t), "engine-c", "include", "shale", "engine.h")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "#include") {
			continue
		}
		n++
		inc := strings.TrimSpace(strings.TrimPrefix(line, "#include"))
		if inc != "<stddef.h>" && inc != "<stdint.h>" {
			t.Errorf("engine.h includes %s; only <stddef.h> and <stdint.h> are allowed", inc)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("engine.h includes nothing: expected <stddef.h> and <stdint.h>")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
