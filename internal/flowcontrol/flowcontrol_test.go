package flowcontrol

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// frameCounter parses the HTTP/2 frames of one direction of a connection
// and counts the PINGs that are not answers (ACK flag clear).
type frameCounter struct {
	mu      sync.Mutex
	skip    int // bytes still to pass over (the client's connection preface)
	buf     []byte
	pings   int
	updates int
}

const (
	frameWindowUpdate = 0x8
	framePing         = 0x6
	flagAck           = 0x1
)

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

// countingConn counts the frames the client sends (out) and receives (in).
type countingConn struct {
	net.Conn
	in, out *frameCounter
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.add(p[:n])
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.out.add(p)
	return c.Conn.Write(p)
}

// probesPer200Calls makes 200 small unary calls over one connection between
// a server and a client built with the given options and returns the PINGs
// each side sent (keepalive is off, so every PING is a bandwidth probe).
func probesPer200Calls(t *testing.T, sopts []grpc.ServerOption, dopts []grpc.DialOption) (serverPings, clientPings, updates int) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(sopts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()

	in, out := &frameCounter{}, &frameCounter{skip: len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")}
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, in: in, out: out}, nil
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial)}, dopts...)
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	for i := 0; i < 200; i++ {
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	sp, su := in.counts()
	cp, cu := out.counts()
	return sp, cp, su + cu
}

// With the static windows neither end probes the connection's bandwidth:
// no PING per call (gRPC's dynamic windows send one, with a WINDOW_UPDATE,
// for nearly every small message on a quiet connection, and the other end
// answers each).
func TestStaticWindowsSendNoProbes(t *testing.T) {
	sp, cp, updates := probesPer200Calls(t, ServerOptions(), DialOptions())
	if sp != 0 || cp != 0 {
		t.Errorf("static windows: server sent %d PINGs, client %d, over 200 calls; want none", sp, cp)
	}
	// A window update per quarter of a window read: none for 200 small
	// calls beyond the connection's first.
	if updates > 2 {
		t.Errorf("static windows: %d WINDOW_UPDATEs over 200 calls; want at most the 2 opening ones", updates)
	}

	// The default (dynamic) windows, for contrast: this is what the
	// options remove.
	sp, cp, _ = probesPer200Calls(t, nil, nil)
	if sp+cp == 0 {
		t.Logf("dynamic windows sent no probes over 200 calls (gRPC's behaviour changed?)")
	}
	t.Logf("dynamic windows: server %d PINGs, client %d, over 200 calls", sp, cp)
}
