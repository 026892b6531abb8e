package raft

import (
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

func testMsg(t pb.MessageType, to uint64, commit uint64, entries int) *pb.Message {
	m := &pb.Message{Type: t.Enum(), To: new(to), Commit: new(commit)}
	for i := 0; i < entries; i++ {
		m.Entries = append(m.Entries, &pb.Entry{Index: new(uint64(10 + i))})
	}
	return m
}

// TestCoalesceAppends: an empty MsgApp followed by another MsgApp to the
// same peer is dropped; appends with entries, empty appends with nothing
// after them for their peer, and other messages stay, in order.
func TestCoalesceAppends(t *testing.T) {
	hb := testMsg(pb.MsgHeartbeat, 2, 5, 0)
	empty2 := testMsg(pb.MsgApp, 2, 5, 0)
	empty3 := testMsg(pb.MsgApp, 3, 5, 0)
	full2 := testMsg(pb.MsgApp, 2, 6, 3)
	empty2b := testMsg(pb.MsgApp, 2, 7, 0)
	empty3b := testMsg(pb.MsgApp, 3, 7, 0)
	out, dropped := coalesceAppends([]*pb.Message{hb, empty2, empty3, full2, empty2b, empty3b})
	want := []*pb.Message{hb, full2, empty2b, empty3b}
	if dropped != 2 || len(out) != len(want) {
		t.Fatalf("kept %d (dropped %d), want %d kept and 2 dropped", len(out), dropped, len(want))
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("message %d: got %v, want %v", i, out[i], want[i])
		}
	}
	// Nothing to drop: the slice comes back unchanged.
	in := []*pb.Message{full2, empty3}
	if out, dropped := coalesceAppends(in); dropped != 0 || len(out) != 2 || out[0] != full2 || out[1] != empty3 {
		t.Fatalf("coalesceAppends changed %v", out)
	}
}
