package raft

import (
	"errors"
	"net"
	"sync"
)

// nodeListener holds a test node's port for the whole test, so that no
// other process can take it between a stop and a restart (picking a free
// port, closing it and listening again later races with every other
// process on the machine). Each start serves on a fresh serving listener
// over it; while the node is stopped, connections are closed as soon as
// they are accepted, so peers fail at once as they would on a refused
// connection.
type nodeListener struct {
	lis  net.Listener
	mu   sync.Mutex
	cur  *servingListener
	done chan struct{}
}

func newNodeListener() (*nodeListener, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	nl := &nodeListener{lis: lis, done: make(chan struct{})}
	go nl.acceptLoop()
	return nl, nil
}

func (nl *nodeListener) addr() string { return nl.lis.Addr().String() }

func (nl *nodeListener) acceptLoop() {
	defer close(nl.done)
	for {
		conn, err := nl.lis.Accept()
		if err != nil {
			return // closed
		}
		nl.mu.Lock()
		cur := nl.cur
		nl.mu.Unlock()
		if cur == nil {
			conn.Close()
			continue
		}
		select {
		case cur.conns <- conn:
		case <-cur.closed:
			conn.Close()
		}
	}
}

// serve returns the listener one start of the node serves on; closing it
// (the server stopping) leaves the port held.
func (nl *nodeListener) serve() net.Listener {
	sl := &servingListener{nl: nl, conns: make(chan net.Conn), closed: make(chan struct{})}
	nl.mu.Lock()
	nl.cur = sl
	nl.mu.Unlock()
	return sl
}

// close releases the port (the end of the test).
func (nl *nodeListener) close() {
	nl.lis.Close()
	<-nl.done
}

type servingListener struct {
	nl     *nodeListener
	conns  chan net.Conn
	once   sync.Once
	closed chan struct{}
}

var errListenerClosed = errors.New("listener closed")

func (sl *servingListener) Accept() (net.Conn, error) {
	select {
	case c := <-sl.conns:
		return c, nil
	case <-sl.closed:
		return nil, errListenerClosed
	}
}

func (sl *servingListener) Close() error {
	sl.once.Do(func() {
		close(sl.closed)
		sl.nl.mu.Lock()
		if sl.nl.cur == sl {
			sl.nl.cur = nil
		}
		sl.nl.mu.Unlock()
	})
	return nil
}

func (sl *servingListener) Addr() net.Addr { return sl.nl.lis.Addr() }
