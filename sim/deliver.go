package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/transport"
)

// storeIfUp returns the node's store while it runs, else nil.
func (nd *node) storeIfUp() *raft.Store {
	if nd == nil || !nd.up {
		return nil
	}
	return nd.store
}

// deliverLater draws the fate of each request the transports posted: lost
// (a partition, or the drop rate), delayed, duplicated.
func (s *Sim) deliverLater(reqs []sendReq) {
	now := s.clock.Now()
	p := s.net.params
	for _, r := range reqs {
		var desc string
		if s.opts.Log != nil {
			desc = describe(r)
		}
		if s.net.blocked[link{r.from, r.to}] {
			s.tracef("partitioned %s", desc)
			s.fail(r, "partitioned")
			continue
		}
		if r.snap == nil && s.rng.Float64() < p.drop {
			s.tracef("drop %s", desc)
			continue
		}
		copies := 1
		if r.snap == nil && s.rng.Float64() < p.dup {
			copies = 2
		}
		for c := 0; c < copies; c++ {
			d := p.minDelay
			if p.maxDelay > p.minDelay {
				d += time.Duration(s.rng.Int64N(int64(p.maxDelay - p.minDelay)))
			}
			r := r
			if c > 0 {
				r.msgs = cloneAll(r.msgs)
			}
			s.schedule(now.Add(d), s.whatf("deliver %s", desc), func() { s.deliver(r) })
		}
	}
}

func cloneAll(msgs []*raftrpcpb.RangeMessage) []*raftrpcpb.RangeMessage {
	out := make([]*raftrpcpb.RangeMessage, len(msgs))
	for i, m := range msgs {
		out[i] = cloneMsg(m)
	}
	return out
}

// describe names a request for the trace: its link and each message's
// range, type, term, index and commit.
func describe(r sendReq) string {
	var b strings.Builder
	fmt.Fprintf(&b, "n%d->n%d", r.from, r.to)
	if r.snap != nil {
		fmt.Fprintf(&b, " snapshot r%d@%d", r.snap.h.GetRangeId(), r.snap.h.GetMessage().GetSnapshot().GetMetadata().GetIndex())
		return b.String()
	}
	for _, m := range r.msgs {
		mm := m.GetMessage()
		fmt.Fprintf(&b, " r%d:%s:%d>%d:t%d:i%d:c%d:e%d", m.GetRangeId(), mm.GetType().String(), mm.GetFrom(), mm.GetTo(),
			mm.GetTerm(), mm.GetIndex(), mm.GetCommit(), len(mm.GetEntries()))
	}
	return b.String()
}

// fail reports an undeliverable request to its sender.
func (s *Sim) fail(r sendReq, why string) {
	if r.snap != nil {
		r.snap.res <- errors.New("sim: snapshot not delivered: " + why)
		return
	}
	if from := s.node(r.from); from.up && !from.tr.isClosed() {
		from.tr.h.OnUnreachable(r.to, r.msgs)
	}
}

// deliver hands a request to its receiver, if it still runs and the link
// is still open.
func (s *Sim) deliver(r sendReq) {
	to, from := s.node(r.to), s.node(r.from)
	if to.up && s.paused(to) {
		// Held in the (simulated) socket buffers; the paused process
		// reads each peer's stream at once when it resumes.
		if to.held == nil {
			to.held = map[uint64][]sendReq{}
		}
		if len(to.held[r.from]) == 0 {
			s.schedule(s.afterPause(to), s.whatf("deliver held n%d->n%d", r.from, r.to), func() {
				held := to.held[r.from]
				delete(to.held, r.from)
				for _, h := range held {
					s.tracef("deliver %s", describe(h))
					s.deliver(h)
				}
			})
		}
		to.held[r.from] = append(to.held[r.from], r)
		return
	}
	if !to.up || to.tr.isClosed() || s.net.blocked[link{r.from, r.to}] {
		s.fail(r, "receiver down or cut off")
		return
	}
	if r.snap != nil {
		// HandleSnapshot returns once the snapshot applied: it runs on
		// its own goroutine, as on a gRPC stream, while the simulator
		// goes on stepping the receiver.
		st, req := to.store, r.snap
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			defer cancel()
			stream := &chunkStream{ctx: ctx, chunks: req.chunks}
			req.res <- st.HandleSnapshot(ctx, req.h, transport.NewSnapshotReader(stream))
		}()
		return
	}
	ack := to.store.HandleRaftMessages(context.Background(), &raftrpcpb.RaftMessageBatch{
		FromNodeId: r.from, ToNodeId: r.to, ClusterId: "sim", Messages: r.msgs,
	})
	if ack != nil && from.up && !from.tr.isClosed() {
		// The acknowledgement travels back at once (it rides the same
		// stream).
		from.tr.h.OnAck(r.to, ack)
	}
}
