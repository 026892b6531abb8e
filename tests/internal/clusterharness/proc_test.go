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
// $CLUSTERHARNESS_FAKE_NODE set, TestMain logs its arguments and serves
// /healthz on the listener its last argument names (--http-fd N), or,
// with $CLUSTERHARNESS_FAKE_NODE_EXIT set, logs and exits at once.
func TestMain(m *testing.M) {
	if os.Getenv("CLUSTERHARNESS_FAKE_NODE") != "" {
		fmt.Println("fake node args:", strings.Join(os.Args[1:], " "))
		if os.Getenv("CLUSTERHARNESS_FAKE_NODE_EXIT") != "" {
			fmt.Println("fake node: dying at startup")
			os.Exit(3)
		}
		fd, err := strconv.Atoi(os.Args[len(os.Args)-1])
		if err != nil {
			fmt.Println("fake node: no listener:", err)
			os.Exit(2)
		}
		lis, err := net.FileListener(os.NewFile(uintptr(fd), "http"))
		if err != nil {
			fmt.Println("fake node:", err)
			os.Exit(2)
		}
		http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		fmt.Println(http.Serve(lis, nil))
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func fakeNode(t *testing.T) (*Proc, string) {
	t.Helper()
	t.Setenv("CLUSTERHARNESS_FAKE_NODE", "1")
	port, err := ReservePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { port.Close() })
	p := NewProc(port.Addr(), filepath.Join(t.TempDir(), "node.log"))
	p.Inherit(Socket{Flag: "--http-fd", Port: port})
	t.Cleanup(p.Kill)
	return p, port.Addr()
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

// TestPortHeldAcrossRestarts: a held port refuses connections while its
// node is down, is never handed to a port-0 bind, and serves the node
// again after a restart.
func TestPortHeldAcrossRestarts(t *testing.T) {
	p, addr := fakeNode(t)
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("a held port accepted a connection before its node started")
	}
	for i := range 2 {
		if err := p.Start(os.Args[0], nil, nil, 30*time.Second); err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
		if _, err := net.Listen("tcp", addr); err == nil {
			t.Fatal("another listener could bind a port a node serves on")
		}
		p.Kill()
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Fatalf("the port accepted a connection after its node was killed (start %d)", i+1)
		}
	}
	for range 2000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		got := l.Addr().String()
		l.Close()
		if got == addr {
			t.Fatalf("a port-0 bind was given the held port %s", addr)
		}
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
