package flowcontrol

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
)

// ProbeCounter counts the bandwidth probes on the client connections it
// dials: the PINGs (not their answers) each end sends, and the
// WINDOW_UPDATEs. For tests that check a server or client keeps its
// windows static; keepalive PINGs count too, so a test must finish
// before either end's keepalive time.
type ProbeCounter struct {
	in  frameCounter // frames the server sent
	out frameCounter // frames the client sent, after its preface
}

// Dialer is a gRPC context dialer (grpc.WithContextDialer) whose
// connections are counted.
func (p *ProbeCounter) Dialer() func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		p.out.mu.Lock()
		p.out.skip += len(clientPreface)
		p.out.mu.Unlock()
		return &countingConn{Conn: c, p: p}, nil
	}
}

// Counts returns the PINGs the server and the client sent, and the
// WINDOW_UPDATEs of both.
func (p *ProbeCounter) Counts() (serverPings, clientPings, windowUpdates int) {
	sp, su := p.in.counts()
	cp, cu := p.out.counts()
	return sp, cp, su + cu
}

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

const (
	frameWindowUpdate = 0x8
	framePing         = 0x6
	flagAck           = 0x1
)

// frameCounter parses the HTTP/2 frames of one direction of a connection.
type frameCounter struct {
	mu      sync.Mutex
	skip    int // bytes still to pass over (the client's preface)
	buf     []byte
	pings   int
	updates int
}

func (f *frameCounter) add(p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.skip > 0 {
		n := min(f.skip, len(p))
		f.skip -= n
		p = p[n:]
	}
	f.buf = append(f.buf, p...)
	for len(f.buf) >= 9 {
		n := int(binary.BigEndian.Uint32(append([]byte{0}, f.buf[:3]...)))
		if len(f.buf) < 9+n {
			return
		}
		switch typ, flags := f.buf[3], f.buf[4]; {
		case typ == framePing && flags&flagAck == 0:
			f.pings++
		case typ == frameWindowUpdate:
			f.updates++
		}
		f.buf = f.buf[9+n:]
	}
}

func (f *frameCounter) counts() (pings, updates int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pings, f.updates
}

type countingConn struct {
	net.Conn
	p *ProbeCounter
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.p.in.add(b[:n])
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.p.out.add(b)
	return c.Conn.Write(b)
}
