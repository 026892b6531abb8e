package clusterharness

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// Port is a TCP port a test holds on a loopback address for the whole
// test, across a node's restarts, so that no other process can take it
// between the moment the test picks it and the moment a node listens on
// it (picking a free port, closing it and naming it to a child races
// with every process of the machine that binds port 0).
//
// The hold is a socket bound to the address but never listening: the
// kernel hands neither port-0 binds nor outgoing connections a port that
// a socket is bound to, yet a connection to it is refused while no node
// serves there, as on a real dead node. Listener opens, next to it, the
// listening socket a node inherits (both set SO_REUSEADDR, which lets
// sockets share an address as long as at most one listens). A child that
// binds the address itself (etcd) can do so too, provided it sets
// SO_REUSEADDR, as every Go listener does.
type Port struct {
	addr string
	fd   int
}

// ReservePort binds a free port on ip and holds it until Close.
func ReservePort(ip string) (*Port, error) {
	fd, err := boundSocket(ip, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot bind a port on %s (the tests need 127.0.0.0/8 on loopback): %w", ip, err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("getsockname: %w", err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	return &Port{addr: net.JoinHostPort(ip, strconv.Itoa(port)), fd: fd}, nil
}

// boundSocket returns a TCP socket with SO_REUSEADDR bound to ip:port.
func boundSocket(ip string, port int) (int, error) {
	v4 := net.ParseIP(ip).To4()
	if v4 == nil {
		return -1, fmt.Errorf("%q is not an IPv4 address", ip)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("SO_REUSEADDR: %w", err)
	}
	sa := &syscall.SockaddrInet4{Port: port}
	copy(sa.Addr[:], v4)
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("bind %s:%d: %w", ip, port, err)
	}
	return fd, nil
}

// Addr is the port's host:port.
func (p *Port) Addr() string { return p.addr }

// Listener returns a new socket listening on the port, as a file to hand
// to a child process (exec.Cmd.ExtraFiles). The caller closes it once the
// child has started: the child keeps its own copy, and the port stops
// accepting connections when the child exits.
func (p *Port) Listener() (*os.File, error) {
	host, port, _ := net.SplitHostPort(p.addr)
	n, _ := strconv.Atoi(port)
	fd, err := boundSocket(host, n)
	if err != nil {
		return nil, err
	}
	if err := syscall.Listen(fd, syscall.SOMAXCONN); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("listen on %s: %w", p.addr, err)
	}
	return os.NewFile(uintptr(fd), "listener "+p.addr), nil
}

// Close gives the port up.
func (p *Port) Close() error { return syscall.Close(p.fd) }

// Socket is a listening socket a child inherits: a fresh listener on Port,
// named to the child by its flag (shale's --listen-fd and --http-fd)
// followed by the descriptor's number.
type Socket struct {
	Flag string
	Port *Port
}

// PassListeners hands cmd, not yet started, a listener for each socket
// (as extra files, their flags appended to its arguments). The caller
// calls done once cmd has started, or failed to.
func PassListeners(cmd *exec.Cmd, socks ...Socket) (done func(), err error) {
	var files []*os.File
	done = func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, s := range socks {
		f, err := s.Port.Listener()
		if err != nil {
			done()
			return nil, err
		}
		files = append(files, f)
		// Extra file i is descriptor 3+i in the child.
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
		cmd.Args = append(cmd.Args, s.Flag, strconv.Itoa(2+len(cmd.ExtraFiles)))
	}
	return done, nil
}
