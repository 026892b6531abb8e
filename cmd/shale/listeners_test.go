package main

import (
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestInheritedListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lf, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	// inherit returns a new descriptor of f, as a parent hands one over
	// (inheritedListener closes it).
	inherit := func(f *os.File) int {
		fd, err := syscall.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}

	// No descriptor: the node binds the address itself.
	addr := "127.0.0.1:7379"
	if got, err := inheritedListener("listen", 0, &addr, nil); got != nil || err != nil || addr != "127.0.0.1:7379" {
		t.Fatalf("fd 0: %v, %v, addr %q", got, err, addr)
	}
	// A descriptor: its address becomes the listen address, unless one
	// was set explicitly, which must be the same.
	got, err := inheritedListener("listen", inherit(lf), &addr, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	got.Close()
	if addr != l.Addr().String() {
		t.Fatalf("listen address %q, want the socket's %q", addr, l.Addr())
	}
	got, err = inheritedListener("listen", inherit(lf), &addr, map[string]string{"listen": "flag"})
	if err != nil {
		t.Fatalf("--listen set to the socket's own address: %v", err)
	}
	got.Close()
	other := "127.0.0.1:1"
	if _, err := inheritedListener("http", inherit(lf), &other, map[string]string{"http": "flag"}); err == nil || !strings.Contains(err.Error(), "not on --http 127.0.0.1:1") {
		t.Fatalf("--http naming another address: %v", err)
	}
	// Descriptors that are no listening socket.
	file, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var a string
	if _, err := inheritedListener("http", inherit(file), &a, nil); err == nil || !strings.Contains(err.Error(), "not a listening socket") {
		t.Fatalf("a regular file: %v", err)
	}
	if _, err := inheritedListener("http", -1, &a, nil); err == nil {
		t.Fatal("a negative descriptor was accepted")
	}
}
