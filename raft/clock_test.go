package raft

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoClockOutsideClock: replication code reads time only through its
// Clock (clock.go), so that a simulator can drive it. The gRPC transport
// (raft/transport) is the real network, replaced whole by Config.NewTransport,
// and is not checked.
func TestNoClockOutsideClock(t *testing.T) {
	forbidden := map[string]map[string]bool{
		"time": {"Now": true, "Since": true, "Until": true, "After": true, "AfterFunc": true,
			"NewTicker": true, "NewTimer": true, "Tick": true, "Sleep": true},
		"context": {"WithTimeout": true, "WithDeadline": true, "WithTimeoutCause": true, "WithDeadlineCause": true},
	}
	var files []string
	for _, dir := range []string{".", "logstore", "keys", "command"} {
		m, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	checked := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") || path == "clock.go" {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if ok && forbidden[pkg.Name][sel.Sel.Name] {
				t.Errorf("%s: %s.%s: use the Store's Clock (clock.go)", fset.Position(sel.Pos()), pkg.Name, sel.Sel.Name)
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("checked only %d files: the test no longer finds the package's sources", checked)
	}
}
