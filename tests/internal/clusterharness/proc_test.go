package clusterharness

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests run this test binary itself as the "node": with
// $CLUSTERHARNESS_FAKE_NODE set to an address, TestMain logs its
// arguments and serves /healthz there (or, with
// $CLUSTERHARNESS_FAKE_NODE_EXIT set, logs and exits at once).
func TestMain(m *testing.M) {
	if addr := os.Getenv("CLUSTERHARNESS_FAKE_NODE"); addr != "" {
		fmt.Println("fake node args:", strings.Join(os.Args[1:], " "))
		if os.Getenv("CLUSTERHARNESS_FAKE_NODE_EXIT") != "" {
			fmt.Println("fake node: dying at startup")
			os.Exit(3)
		}
		http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		fmt.Println(http.ListenAndServe(addr, nil))
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func fakeNode(t *testing.T) (*Proc, string) {
	t.Helper()
	port, err := FreePortOn("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	t.Setenv("CLUSTERHARNESS_FAKE_NODE", addr)
	p := NewProc(addr, filepath.Join(t.TempDir(), "node.log"))
	t.Cleanup(p.Kill)
	return p, addr
}

func TestProcLifecycle(t *testing.T) {
	p, _ := fakeNode(t)
	if p.Running() {
		t.Fatal("running before Start")
	}
	if err := p.Start(os.Args[0], []string{"--every-start"}, []string{"--first-start-only"}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if !p.Running() || p.Starts() != 1 {
		t.Fatalf("after Start: running %v, starts %d", p.Running(), p.Starts())
	}
	if err := p.Pause(); err != nil || !p.Paused() || !p.Running() {
		t.Fatalf("Pause: %v, paused %v, running %v", err, p.Paused(), p.Running())
	}
	if err := p.Resume(); err != nil || p.Paused() {
		t.Fatalf("Resume: %v, paused %v", err, p.Paused())
	}
	p.Kill()
	if p.Running() {
		t.Fatal("running after Kill")
	}
	if err := p.Start(os.Args[0], []string{"--every-start"}, []string{"--first-start-only"}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	log := p.Log()
	if strings.Count(log, "--every-start") != 2 || strings.Count(log, "--first-start-only") != 1 {
		t.Fatalf("the first-start arguments must be passed once, the others every time; log:\n%s", log)
	}
	if !p.Signal(syscall.SIGTERM, 10*time.Second) || p.Running() {
		t.Fatal("still running 10s after SIGTERM")
	}
	if p.ExitErr() == nil {
		t.Fatal("a process ended by SIGTERM reports a clean exit")
	}
}

func TestProcStartReportsEarlyExit(t *testing.T) {
	p, _ := fakeNode(t)
	t.Setenv("CLUSTERHARNESS_FAKE_NODE_EXIT", "1")
	err := p.Start(os.Args[0], nil, nil, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited during startup") || !strings.Contains(err.Error(), "dying at startup") {
		t.Fatalf("Start of a process that exits = %v, want an error quoting its log", err)
	}
}

func TestTail(t *testing.T) {
	if got := Tail("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("Tail = %q", got)
	}
	if got := Tail("a", 5); got != "a" {
		t.Errorf("Tail = %q", got)
	}
}
