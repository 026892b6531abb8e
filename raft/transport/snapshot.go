package transport

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/shaledb/shale/api/raftrpcpb"
)

// SnapshotReader yields the data chunks of one incoming snapshot.
type SnapshotReader struct {
	stream  raftrpcpb.RaftTransport_SnapshotServer
	done    bool
	entries uint64 // total_entries from the sender's done chunk
	bytes   uint64 // data bytes received
}

// Next returns the next data chunk, or io.EOF after the sender's final
// chunk. The chunk is owned by the caller. An error other than io.EOF
// means the stream broke or was malformed; the snapshot must be discarded.
func (r *SnapshotReader) Next() ([]byte, error) {
	if r.done {
		return nil, io.EOF
	}
	c, err := r.stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("raft transport: snapshot stream ended without a done chunk")
		}
		return nil, fmt.Errorf("raft transport: receiving snapshot: %w", err)
	}
	switch ch := c.GetChunk().(type) {
	case *raftrpcpb.SnapshotChunk_Data:
		r.bytes += uint64(len(ch.Data))
		return ch.Data, nil
	case *raftrpcpb.SnapshotChunk_Done:
		if got, want := r.bytes, ch.Done.GetTotalBytes(); got != want {
			return nil, fmt.Errorf("raft transport: snapshot carried %d data bytes, sender says %d", got, want)
		}
		r.done = true
		r.entries = ch.Done.GetTotalEntries()
		return nil, io.EOF
	default:
		return nil, fmt.Errorf("raft transport: unexpected snapshot chunk %T", ch)
	}
}

// TotalEntries returns the entry count the sender announced in its final
// chunk; valid once Next has returned io.EOF. The receiver checks it
// against the entries it decoded.
func (r *SnapshotReader) TotalEntries() uint64 { return r.entries }

// SnapshotSource produces the data of one outgoing snapshot: it calls emit
// with successive data chunks (encoded entries; the transport does not
// look inside) and returns the number of entries it emitted. emit blocks
// to honour the rate limit and returns an error once the stream failed.
type SnapshotSource func(emit func(chunk []byte) error) (entries uint64, err error)

// SendSnapshot streams one snapshot to h.ToNodeId: the header, the data
// chunks src emits (throttled by the node-wide snapshot rate), and a final
// chunk. It returns nil once the receiver has applied the snapshot.
func (t *Transport) SendSnapshot(ctx context.Context, h *raftrpcpb.SnapshotHeader, src SnapshotSource) error {
	p, err := t.peer(h.GetToNodeId())
	if err != nil {
		return err
	}
	conn, err := p.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel)
	defer stop()

	h.FromNodeId = t.cfg.NodeID
	h.ClusterId = t.cfg.ClusterID
	s, err := raftrpcpb.NewRaftTransportClient(conn).Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("raft transport: opening snapshot stream to node %d: %w", h.GetToNodeId(), err)
	}
	if err := s.Send(&raftrpcpb.SnapshotChunk{Chunk: &raftrpcpb.SnapshotChunk_Header{Header: h}}); err != nil {
		return t.snapshotSendErr(s, err)
	}
	var total uint64
	emit := func(chunk []byte) error {
		if len(chunk) == 0 {
			return nil
		}
		if err := t.waitRate(ctx, len(chunk)); err != nil {
			return err
		}
		total += uint64(len(chunk))
		return s.Send(&raftrpcpb.SnapshotChunk{Chunk: &raftrpcpb.SnapshotChunk_Data{Data: chunk}})
	}
	n, err := src(emit)
	if err != nil {
		return t.snapshotSendErr(s, err)
	}
	done := &raftrpcpb.SnapshotDone{TotalEntries: n, TotalBytes: total}
	if err := s.Send(&raftrpcpb.SnapshotChunk{Chunk: &raftrpcpb.SnapshotChunk_Done{Done: done}}); err != nil {
		return t.snapshotSendErr(s, err)
	}
	resp, err := s.CloseAndRecv()
	if err != nil {
		return fmt.Errorf("raft transport: snapshot to node %d: %w", h.GetToNodeId(), err)
	}
	if !resp.GetApplied() {
		return fmt.Errorf("raft transport: node %d refused the snapshot of range %d: %s", h.GetToNodeId(), h.GetRangeId(), resp.GetError())
	}
	return nil
}

// snapshotSendErr turns a failed send into the most telling error: when
// the receiver already answered (a refusal), its answer.
func (t *Transport) snapshotSendErr(s raftrpcpb.RaftTransport_SnapshotClient, err error) error {
	if errors.Is(err, io.EOF) {
		if resp, rerr := s.CloseAndRecv(); rerr == nil && !resp.GetApplied() {
			return fmt.Errorf("raft transport: snapshot refused: %s", resp.GetError())
		} else if rerr != nil {
			return fmt.Errorf("raft transport: snapshot stream: %w", rerr)
		}
	}
	return fmt.Errorf("raft transport: snapshot stream: %w", err)
}

// waitRate blocks until n bytes may be sent under the snapshot rate limit.
func (t *Transport) waitRate(ctx context.Context, n int) error {
	for n > 0 {
		step := min(n, t.limiter.Burst())
		if err := t.limiter.WaitN(ctx, step); err != nil {
			return err
		}
		n -= step
	}
	return nil
}

// SnapshotChunkBytes returns the configured target chunk size, so that a
// SnapshotSource can size its chunks.
func (t *Transport) SnapshotChunkBytes() int { return t.cfg.SnapshotChunkBytes }
