package tests

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestShalectlWatch: "shalectl watch PREFIX --from V" prints the changes
// after V under PREFIX, one line each in version order, and nothing
// outside it; bad input is refused before anything is sent.
func TestShalectlWatch(t *testing.T) {
	node := startNode(t, filepath.Join(t.TempDir(), "n"))
	ep := node.grpcAddr
	cl, err := client.Dial(context.Background(), []string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	from, err := cl.PutVersioned(ctx, []byte("p/a"), []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"p/b", "2"}, {"q/x", "no"}, {"p/a", "3"}} {
		if err := cl.Put(ctx, []byte(kv[0]), []byte(kv[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.Delete(ctx, []byte("p/b")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCtl(t, ep, "watch", "p/", "--from", client.FormatTimestamp(from), "--limit", "3", "--prev")
	if code != 0 {
		t.Fatalf("watch: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"PUT\tp/b\t2\t", "PUT\tp/a\t3\t", "DELETE\tp/b\t\t"}
	if len(lines) != len(want) {
		t.Fatalf("watch printed %q, want 3 lines like %q", out, want)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, want[i]) {
			t.Fatalf("line %d is %q, want it to start with %q (all: %q)", i, l, want[i], out)
		}
	}
	if !strings.HasSuffix(lines[1], "\t1") || !strings.HasSuffix(lines[2], "\t2") {
		t.Fatalf("--prev columns wrong: %q", out)
	}
	for _, bad := range [][]string{{"watch", "p/", "--from", "yesterday"}, {"watch", "p/", "--limit", "-1"}, {"watch"}} {
		_, errOut, code := runCtl(t, ep, bad...)
		if code == 0 {
			t.Errorf("shalectl %v: exit 0, want a refusal (%s)", bad, errOut)
		}
	}
}
