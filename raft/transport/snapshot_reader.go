package transport

import "github.com/shaledb/shale/api/raftrpcpb"

// NewSnapshotReader reads an incoming snapshot from stream, whose first
// chunk (the header) the caller has already taken. The gRPC server makes
// one per Snapshot stream; a simulated transport (sim/) makes one over
// the chunks it carries in memory.
func NewSnapshotReader(stream raftrpcpb.RaftTransport_SnapshotServer) *SnapshotReader {
	return &SnapshotReader{stream: stream}
}
