package main

import (
	"fmt"
	"net"
	"os"
)

// A node binds --listen and --http itself, unless it inherits listening
// sockets from whoever started it (--listen-fd, --http-fd), as systemd's
// socket activation or a test harness hands them over: the parent holds
// the ports, so no other process can take them between the moment they
// are chosen and the moment the node serves on them.

// inheritedListener returns the listening socket of descriptor fd that
// the process inherited for --name (from --name-fd), and sets *addr to its
// address; nil when fd is 0 (the node binds *addr itself). An address set
// explicitly (sources[name]) must be the socket's.
func inheritedListener(name string, fd int, addr *string, sources map[string]string) (net.Listener, error) {
	if fd == 0 {
		return nil, nil
	}
	if fd < 0 {
		return nil, fmt.Errorf("--%s-fd %d: not a file descriptor", name, fd)
	}
	f := os.NewFile(uintptr(fd), "--"+name+"-fd")
	lis, err := net.FileListener(f) // dups the descriptor
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("--%s-fd %d: not a listening socket: %w", name, fd, err)
	}
	got := lis.Addr().String()
	if sources[name] != "" && !sameAddr(*addr, got) {
		lis.Close()
		return nil, fmt.Errorf("--%s-fd %d listens on %s, not on --%s %s", name, fd, got, name, *addr)
	}
	*addr = got
	return lis, nil
}

// sameAddr reports whether two host:port addresses are the same (a
// host name is compared as written).
func sameAddr(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || ap != bp {
		return false
	}
	if ai, bi := net.ParseIP(ah), net.ParseIP(bh); ai != nil && bi != nil {
		return ai.Equal(bi)
	}
	return ah == bh
}

func closeListener(l net.Listener) {
	if l != nil {
		l.Close()
	}
}
