// Package flowcontrol holds the HTTP/2 flow-control windows of every gRPC
// connection Shale makes or accepts: a node's server, its dials to peers
// (Raft transport, forwarding, the timestamp oracle) and the client
// library's dials. It lives under api/ because both sides of the wire
// hold to it and the client library may import only api/ and hlc/ of
// this module (tests/deps_test.go).
//
// The windows are static. gRPC's default is a dynamic window sized by
// bandwidth-delay probes: a receiver that gets a DATA frame while no probe
// is out sends a WINDOW_UPDATE and a PING, and the sender answers the
// PING. On a connection that carries small messages with gaps between
// them (a Raft stream at low load, one client's puts) nearly every
// message starts a probe, so each message costs two more socket writes,
// two more reads and the wakeups of both ends: at one client, about half
// of a cluster's socket writes per put were probes and their answers
// (docs/put-cost.md).
//
// A static window never probes. StreamWindow is the most a sender may
// have sent on a stream that the receiving application has not read: what
// a stream the receiver stops reading (a multiplexed stream at its call
// limit) can hold unread, and what one stream moves per round trip
// (1 MiB: 100 MB/s at 10 ms, enough for snapshots and backups within a
// region). The dynamic windows started at 64 KiB but grew, on a sender's
// fast writes, up to 16 MiB a stream. ConnWindow bounds the bytes in
// flight on a connection across its streams; gRPC gives it back as frames
// arrive, not as they are read, so it holds nothing unread by itself.
package flowcontrol

import "google.golang.org/grpc"

// StreamWindow is the flow-control window of each HTTP/2 stream.
const StreamWindow = 1 << 20

// ConnWindow is the flow-control window of each HTTP/2 connection, shared
// by its streams.
const ConnWindow = 16 << 20

// ServerOptions are the windows of a gRPC server.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.StaticStreamWindowSize(StreamWindow),
		grpc.StaticConnWindowSize(ConnWindow),
	}
}

// DialOptions are the windows of a gRPC client connection.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithStaticStreamWindowSize(StreamWindow),
		grpc.WithStaticConnWindowSize(ConnWindow),
	}
}
