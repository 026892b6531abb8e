package client

import (
	"context"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
)

// TestWatchPieceResume: a piece resumes from its progress, or from just
// below the last version it delivered when that is above, and a stream
// resumed there drops the events of that version it already delivered;
// a split hands the upper part the same resume state.
func TestWatchPieceResume(t *testing.T) {
	ts := func(n int64) *kvpb.Timestamp { return &kvpb.Timestamp{WallNanos: n} }
	ev := func(k string, n int64) *kvpb.WatchEvent {
		return &kvpb.WatchEvent{Type: kvpb.WatchEventType_WATCH_EVENT_TYPE_PUT, Key: []byte(k), Version: ts(n)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &watchMerge{ctx: ctx, msgs: make(chan pieceMsg, 16)}
	p := &watchPiece{start: []byte("a"), end: []byte("z")}
	if p.resume() != nil {
		t.Fatal("a piece from now resumes from a version before its first message")
	}
	recv := func(resp *kvpb.WatchResponse) pieceMsg {
		t.Helper()
		if err := m.accept(p, resp); err != nil {
			t.Fatal(err)
		}
		select {
		case msg := <-m.msgs:
			return msg
		default:
			return pieceMsg{}
		}
	}
	recv(&kvpb.WatchResponse{Progress: ts(10)})
	if r := p.resume(); r.GetWallNanos() != 10 {
		t.Fatalf("resume = %v, want 10", r)
	}
	recv(&kvpb.WatchResponse{Events: []*kvpb.WatchEvent{ev("b", 11), ev("c", 12), ev("d", 12)}})
	// Broken after part of version 12: resume just below it.
	if r := p.resume(); r.GetWallNanos() != 11 || r.GetLogical() != 1<<31-1 {
		t.Fatalf("resume = %v, want just below 12", r)
	}
	q := p.splitAt([]byte("d"), 1)
	if string(p.end) != "d" || string(q.start) != "d" || q.last != p.last || q.progress != p.progress {
		t.Fatalf("split: %+v / %+v", p, q)
	}
	// The resumed stream sends version 12 again, then more.
	msg := recv(&kvpb.WatchResponse{Events: []*kvpb.WatchEvent{ev("c", 12), ev("e", 12), ev("f", 13)}, Progress: ts(13)})
	if len(msg.events) != 2 || string(msg.events[0].Key) != "e" || string(msg.events[1].Key) != "f" || !msg.hasProgress || msg.progress.WallTime != 13 {
		t.Fatalf("after the resume: %+v", msg)
	}
	if r := p.resume(); r.GetWallNanos() != 13 {
		t.Fatalf("resume = %v, want 13 (progress at the last event)", r)
	}
}
