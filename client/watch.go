package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
)

// Watch (docs/watch.md): a span is watched as pieces, each within one
// range and served by one stream from that range's leader. A piece starts
// as the whole span and splits itself at the end of the range it lands
// in; when its stream breaks (node killed, leader moved, range split or
// merged, watcher cut off for falling behind), it resumes from what it
// received: every event up to its last progress notice, and the events of
// its last version, which it skips by key when they come again. The
// streams' events go to the caller as they arrive (events of one key in
// version order: a key is in one piece, and a piece's stream is in
// version order), and the span's progress is the least of its pieces'.

// WatchEventType says what a WatchEvent did to its key.
type WatchEventType int

const (
	// WatchPut: the key was written; Value is its new value.
	WatchPut WatchEventType = iota + 1
	// WatchDelete: the key was deleted.
	WatchDelete
)

func (t WatchEventType) String() string {
	switch t {
	case WatchPut:
		return "PUT"
	case WatchDelete:
		return "DELETE"
	}
	return fmt.Sprintf("WatchEventType(%d)", int(t))
}

// WatchEvent is one change of a watched key.
type WatchEvent struct {
	Type    WatchEventType
	Key     []byte
	Value   []byte // the new value of a put
	Version Timestamp
	// PrevFound and PrevValue: the key's value just below Version (with
	// WatchOptions.PrevValues only).
	PrevFound bool
	PrevValue []byte
}

// WatchResponse is what a watch delivers: events, a progress notice, or
// both; or, last, the error that ended the watch.
type WatchResponse struct {
	// Events in the order their streams sent them: each key's in version
	// order.
	Events []WatchEvent
	// Progress, when not zero: every event of the span at or below it has
	// been delivered (in this response or before). Progress only rises.
	Progress Timestamp
	// Err ends the watch: the channel closes after it. ErrHistoryCompacted
	// when the start (or a resume point, after a long outage) is below a
	// range's GC threshold; ErrInvalidArgument for a bad span; the
	// context's error when ctx ended.
	Err error
}

// WatchOptions are Watch's options; the zero value watches from now.
type WatchOptions struct {
	// From: deliver every change with a version above From (within the
	// retention window). Zero: from now (each range's changes after its
	// stream started).
	From Timestamp
	// PrevValues asks for each event's previous value.
	PrevValues bool
}

// PrefixEnd returns the end of the span of keys starting with prefix: the
// smallest key above all of them, or nil (the keyspace's end) when there
// is none (an empty prefix, or one of 0xff bytes).
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Watch watches the keys of [start, end) (a nil or empty end: to the
// keyspace's end) until ctx ends or the watch fails. The channel delivers
// events and progress notices; it is closed after a response with Err.
// The caller must keep reading: a watcher that stops reading falls behind
// and is cut off by the nodes, then resumes (nothing is lost) once it
// reads again. An empty or inverted span is refused at once.
func (c *Client) Watch(ctx context.Context, start, end []byte, opts *WatchOptions) (<-chan WatchResponse, error) {
	if opts == nil {
		opts = &WatchOptions{}
	}
	if len(end) == 0 {
		end = nil
	}
	if end != nil && bytes.Compare(start, end) >= 0 {
		return nil, &Error{Op: "Watch", kind: ErrInvalidArgument,
			Msg: fmt.Sprintf("the span [%q, %q) is empty or inverted: end must be above start", start, end)}
	}
	if c.closed.Load() {
		return nil, &Error{Op: "Watch", Msg: "the client is closed", kind: ErrClosed}
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &watchMerge{c: c, opts: *opts, ctx: ctx, cancel: cancel, pieces: 1,
		out: make(chan WatchResponse, 16), msgs: make(chan pieceMsg, 16), progress: map[int]Timestamp{}}
	p := &watchPiece{id: 0, start: bytes.Clone(start), end: bytes.Clone(end)}
	if !opts.From.IsZero() {
		p.progress, p.started = opts.From, true
		m.progress[0] = p.progress
	}
	go m.run()
	go m.runPiece(p)
	return m.out, nil
}

// watchMerge merges the streams of one watch's pieces.
type watchMerge struct {
	c      *Client
	opts   WatchOptions
	ctx    context.Context
	cancel context.CancelFunc
	out    chan WatchResponse
	msgs   chan pieceMsg
	// Owned by run: the progress of each piece that has one, how many
	// pieces there are, the span's progress last delivered.
	progress map[int]Timestamp
	pieces   int
	sent     Timestamp
}

// pieceMsg is what a piece tells the merge: events and progress, a new
// piece split off it (split != nil), or the error that ends the watch.
type pieceMsg struct {
	id          int
	events      []WatchEvent
	progress    Timestamp
	hasProgress bool
	split       *watchPiece
	err         error
}

// watchPiece is one range's part of a watched span and where its stream
// resumes. Owned by its goroutine.
type watchPiece struct {
	id         int
	start, end []byte
	// started: progress is known (the first message of a stream from now
	// set it, or the watch has a start).
	started  bool
	progress Timestamp
	// last is the version of the last event delivered and lastKeys the
	// keys delivered at it: a stream resumed below last sends them again.
	last     Timestamp
	lastKeys map[string]struct{}
}

// resume returns the start_version a new stream of p asks for (nil: from
// now).
func (p *watchPiece) resume() *kvpb.Timestamp {
	switch {
	case !p.started:
		return nil
	case p.progress.Less(p.last):
		return &kvpb.Timestamp{WallNanos: p.last.Prev().WallTime, Logical: uint32(p.last.Prev().Logical)}
	}
	return &kvpb.Timestamp{WallNanos: p.progress.WallTime, Logical: uint32(p.progress.Logical)}
}

// splitAt cuts p at key and returns the part above it, with p's resume
// state.
func (p *watchPiece) splitAt(key []byte, id int) *watchPiece {
	q := &watchPiece{id: id, start: bytes.Clone(key), end: p.end, started: p.started, progress: p.progress, last: p.last}
	if p.lastKeys != nil {
		q.lastKeys = make(map[string]struct{})
		for k := range p.lastKeys {
			if bytes.Compare([]byte(k), key) >= 0 {
				q.lastKeys[k] = struct{}{}
			}
		}
	}
	p.end = bytes.Clone(key)
	return q
}

// run delivers the pieces' messages until the watch ends.
func (m *watchMerge) run() {
	defer close(m.out)
	nextID := 1
	for {
		var msg pieceMsg
		select {
		case msg = <-m.msgs:
		case <-m.ctx.Done():
			m.deliver(WatchResponse{Err: m.ctx.Err()})
			return
		}
		if msg.err != nil {
			m.cancel()
			m.deliver(WatchResponse{Err: msg.err})
			return
		}
		if msg.split != nil {
			msg.split.id = nextID
			nextID++
			m.pieces++
			if msg.split.started {
				m.progress[msg.split.id] = msg.split.progress
			}
			go m.runPiece(msg.split)
			continue
		}
		resp := WatchResponse{Events: msg.events}
		if msg.hasProgress {
			if old, ok := m.progress[msg.id]; !ok || old.Less(msg.progress) {
				m.progress[msg.id] = msg.progress
			}
			if len(m.progress) == m.pieces {
				low := Timestamp{}
				first := true
				for _, p := range m.progress {
					if first || p.Less(low) {
						low, first = p, false
					}
				}
				if m.sent.Less(low) {
					resp.Progress, m.sent = low, low
				}
			}
		}
		if len(resp.Events) == 0 && resp.Progress.IsZero() {
			continue
		}
		if !m.deliver(resp) {
			return
		}
	}
}

// deliver hands resp to the caller unless ctx ends first.
func (m *watchMerge) deliver(resp WatchResponse) bool {
	if resp.Err != nil {
		// The last response: the caller gets it even after ctx ended, if
		// the channel has room.
		select {
		case m.out <- resp:
		default:
		}
		return false
	}
	select {
	case m.out <- resp:
		return true
	case <-m.ctx.Done():
		return false
	}
}

// send hands msg to run unless ctx ends first.
func (m *watchMerge) send(msg pieceMsg) bool {
	select {
	case m.msgs <- msg:
		return true
	case <-m.ctx.Done():
		return false
	}
}

// runPiece keeps p's stream going until the watch ends.
func (m *watchMerge) runPiece(p *watchPiece) {
	fails := 0
	for m.ctx.Err() == nil {
		stream, desc, cancel, err := m.open(p)
		if err != nil {
			if m.ctx.Err() != nil {
				return
			}
			if fatalWatchError(err) {
				m.send(pieceMsg{id: p.id, err: err})
				return
			}
			if !sleep(m.ctx, m.c.backoff(fails)) {
				return
			}
			fails++
			continue
		}
		if de := desc.GetEndKey(); len(de) != 0 && (p.end == nil || bytes.Compare(de, p.end) < 0) {
			// The range ends inside the piece: the rest is another piece.
			if !m.send(pieceMsg{id: p.id, split: p.splitAt(de, 0)}) {
				cancel()
				return
			}
		}
		err = m.receive(p, stream)
		cancel()
		if err == nil || m.ctx.Err() != nil {
			return
		}
		if _, ok := status.FromError(err); ok {
			if ent := m.c.cache.entry(desc.GetRangeId()); ent != nil {
				m.c.learn(err, ent)
			}
			err = classify("Watch", "", false, err, nil).err
		}
		if fatalWatchError(err) {
			m.send(pieceMsg{id: p.id, err: err})
			return
		}
		fails = 0
		if !sleep(m.ctx, m.c.backoff(fails)) {
			return
		}
	}
}

// fatalWatchError reports whether err ends the watch rather than its
// stream.
func fatalWatchError(err error) bool {
	return errors.Is(err, ErrHistoryCompacted) || errors.Is(err, ErrInvalidArgument) ||
		errors.Is(err, ErrPermissionDenied) || errors.Is(err, ErrClosed)
}

// open starts a stream for p on the leader of the range holding p's
// start and reads its first message. The stream lives until cancel.
func (m *watchMerge) open(p *watchPiece) (kvpb.Watch_WatchClient, *kvpb.RangeDescriptor, context.CancelFunc, error) {
	var stream kvpb.Watch_WatchClient
	var desc *kvpb.RangeDescriptor
	var cancel context.CancelFunc
	var first *kvpb.WatchResponse
	err := m.c.routed(m.ctx, "Watch", false, routeKey{key: p.start}, func(actx context.Context, e *endpoint, d *kvpb.RangeDescriptor) error {
		end := p.end
		if de := d.GetEndKey(); len(de) != 0 && (end == nil || bytes.Compare(de, end) < 0) {
			end = de
		}
		req := &kvpb.WatchRequest{Header: routeHeader(m.c.header(false), d), StartKey: p.start, EndKey: end,
			StartVersion: p.resume(), PrevValues: m.opts.PrevValues}
		cc, release, err := m.c.watchConn(e)
		if err != nil {
			return err
		}
		// The stream outlives the attempt; only its opening is bounded by
		// the attempt's deadline. Its connection slot is given back when
		// it ends.
		sctx, cancelStream := context.WithCancel(m.ctx)
		scancel := func() { cancelStream(); release() }
		stop := context.AfterFunc(actx, cancelStream)
		s, err := kvpb.NewWatchClient(cc).Watch(sctx, req)
		var resp *kvpb.WatchResponse
		if err == nil {
			resp, err = s.Recv()
		}
		if !stop() && err == nil {
			err = actx.Err()
		}
		if err != nil {
			scancel()
			return err
		}
		stream, desc, cancel, first = s, d, scancel, resp
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if err := m.accept(p, first); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return stream, desc, cancel, nil
}

// receive passes the stream's messages to run until the stream fails; it
// returns the stream's error as it came.
func (m *watchMerge) receive(p *watchPiece, stream kvpb.Watch_WatchClient) error {
	for {
		resp, err := stream.Recv()
		if err != nil {
			if m.ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := m.accept(p, resp); err != nil {
			return err
		}
	}
}

// accept takes one message of p's stream: it updates p's resume state,
// drops the events p delivered before a resume, and passes the rest on.
func (m *watchMerge) accept(p *watchPiece, resp *kvpb.WatchResponse) error {
	msg := pieceMsg{id: p.id}
	for _, e := range resp.GetEvents() {
		v, err := fromProto(e.GetVersion())
		if err != nil {
			return &Error{Op: "Watch", Msg: "an event with a malformed version: " + err.Error(), kind: ErrInternal}
		}
		switch {
		case v == p.last:
			if _, seen := p.lastKeys[string(e.GetKey())]; seen {
				continue
			}
		default:
			p.last = v
			clear(p.lastKeys)
		}
		if p.lastKeys == nil {
			p.lastKeys = make(map[string]struct{})
		}
		p.lastKeys[string(e.GetKey())] = struct{}{}
		ev := WatchEvent{Type: WatchPut, Key: e.GetKey(), Value: e.GetValue(), Version: v,
			PrevFound: e.GetPrevFound(), PrevValue: e.GetPrevValue()}
		if e.GetType() == kvpb.WatchEventType_WATCH_EVENT_TYPE_DELETE {
			ev.Type, ev.Value = WatchDelete, nil
		}
		msg.events = append(msg.events, ev)
	}
	if resp.GetProgress() != nil {
		pr, err := fromProto(resp.GetProgress())
		if err != nil {
			return &Error{Op: "Watch", Msg: "a malformed progress notice: " + err.Error(), kind: ErrInternal}
		}
		if !p.started || p.progress.Less(pr) {
			p.progress, p.started = pr, true
		}
		msg.progress, msg.hasProgress = p.progress, true
	}
	if len(msg.events) == 0 && resp.GetProgress() == nil {
		return nil
	}
	if !m.send(msg) {
		return m.ctx.Err()
	}
	return nil
}
