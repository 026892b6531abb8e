package raft

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/raft/keys"
)

func appResp(to, term, index uint64, reject bool) *pb.Message {
	return &pb.Message{Type: pb.MsgAppResp.Enum(), To: new(to), Term: new(term), Index: new(index), Reject: new(reject)}
}

// TestDropNoticeAnswers: of a Ready's responses, one acknowledgement per
// commit notice is dropped, to the notice's sender, in its term, of an
// index at or below the notice's; rejections, answers at another term or
// to another replica, acknowledgements of more than the notice named,
// a second answer of the same index and other messages stay, in order.
func TestDropNoticeAnswers(t *testing.T) {
	r := &Replica{notices: []commitNotice{{leader: 1, term: 5, index: 10}}}
	self := &pb.Message{Type: pb.MsgStorageAppendResp.Enum(), To: new(uint64(2))}
	reject := appResp(1, 5, 10, true)
	newer := appResp(1, 6, 0, false) // tells a stale leader to step down
	other := appResp(3, 5, 10, false)
	more := appResp(1, 5, 11, false)
	ack := appResp(1, 5, 10, false)
	again := appResp(1, 5, 10, false)
	hb := &pb.Message{Type: pb.MsgHeartbeatResp.Enum(), To: new(uint64(1)), Term: new(uint64(5))}
	out, dropped := r.dropNoticeAnswersLocked([]*pb.Message{self, reject, newer, other, more, ack, again, hb})
	want := []*pb.Message{self, reject, newer, other, more, again, hb}
	if dropped != 1 || len(out) != len(want) {
		t.Fatalf("kept %d (dropped %d), want %d kept and 1 dropped", len(out), dropped, len(want))
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("message %d: got %v, want %v", i, out[i], want[i])
		}
	}
	if len(r.notices) != 0 {
		t.Fatalf("notices left after the Ready: %v", r.notices)
	}
	// An answer below the notice's index (the follower's commit index is
	// the leader's Match or less) is dropped too; with no notice, nothing.
	r.notices = []commitNotice{{leader: 1, term: 5, index: 10}}
	if out, dropped := r.dropNoticeAnswersLocked([]*pb.Message{appResp(1, 5, 9, false)}); dropped != 1 || len(out) != 0 {
		t.Fatalf("kept %v (dropped %d), want the answer dropped", out, dropped)
	}
	in := []*pb.Message{appResp(1, 5, 9, false)}
	if out, dropped := r.dropNoticeAnswersLocked(in); dropped != 0 || len(out) != 1 {
		t.Fatalf("without a notice: kept %v (dropped %d)", out, dropped)
	}
}

// TestCommitNoticesNotAnswered: with the followers' answers to commit
// notices dropped, writes one after another still reach every follower's
// commit and applied index, and the range goes to rest, which needs the
// leader to count every follower as replicating, recently active and
// holding its whole log (quiesce.go): no answer the leader waited for was
// lost. The same writes with the notices answered (as Raft does) send
// more append answers.
func TestCommitNoticesNotAnswered(t *testing.T) {
	rid := uint64(keys.FirstUserRangeID)
	answers := map[bool]int64{}
	for _, answer := range []bool{false, true} {
		t.Run(fmt.Sprintf("answered=%v", answer), func(t *testing.T) {
			var counting atomic.Bool
			var n atomic.Int64
			c := newTestCluster(t, 3, func(cfg *Config) {
				cfg.Testing.AnswerCommitNotices = answer
				cfg.Testing.OnSend = func(_ uint64, msgs []*raftrpcpb.RangeMessage) {
					for _, rm := range msgs {
						if counting.Load() && rm.GetRangeId() == rid && rm.GetMessage().GetType() == pb.MsgAppResp {
							n.Add(1)
						}
					}
				}
			})
			ctx := ctxT(t, 60*time.Second)
			if _, err := c.put(ctx, rid, "k", "v"); err != nil {
				t.Fatal(err)
			}
			sum := func() float64 {
				n := 0.0
				for _, s := range c.running() {
					n += counterValue(s.metrics.noticeAnswersDropped)
				}
				return n
			}
			dropped0 := sum()
			counting.Store(true)
			var idx uint64
			for i := 0; i < 50; i++ {
				var err error
				if idx, err = c.put(ctx, rid, fmt.Sprintf("k%d", i), "v"); err != nil {
					t.Fatal(err)
				}
			}
			c.waitApplied(rid, idx)
			counting.Store(false)
			for _, id := range c.ids() {
				if v, _ := c.get(id, "k49"); v != "v" {
					t.Errorf("node %d holds k49=%q, want v", id, v)
				}
			}
			answers[answer] = n.Load()
			dropped := sum() - dropped0
			t.Logf("50 writes: %d append answers sent, %v notice answers dropped", n.Load(), dropped)
			if answer && dropped != 0 {
				t.Errorf("%v notice answers dropped with the notices unmarked", dropped)
			}
			if !answer && dropped < 25 {
				t.Errorf("%v notice answers dropped over 50 writes, want at least 25", dropped)
			}
			c.waitQuiescent(rid)
		})
	}
	if answers[false] >= answers[true] {
		t.Errorf("50 writes sent %d append answers with notices unanswered, %d answered: want fewer", answers[false], answers[true])
	}
}
