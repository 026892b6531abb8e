package rangesm_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/rangesm"
)

// sink records what a replica hands its FeedSink.
type sink struct {
	watched atomic.Bool
	mu      sync.Mutex
	batches []applied
}

type applied struct {
	changes  []mvcc.Change
	frontier hlc.Timestamp
	complete bool
}

func (s *sink) Watched(rangeID uint64) bool { return rangeID == user && s.watched.Load() }

func (s *sink) Applied(rangeID uint64, _ *kvpb.RangeDescriptor, changes []mvcc.Change, frontier hlc.Timestamp, complete bool) {
	if rangeID != user {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, applied{changes, frontier, complete})
}

// since returns what was handed over from batch i on, the changes as
// "key=value(prev)" or "key deleted(prev)".
func (s *sink) since(i int) (changes []string, complete bool, frontier hlc.Timestamp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	complete = true
	for _, b := range s.batches[i:] {
		complete = complete && b.complete
		frontier = b.frontier
		for _, c := range b.changes {
			prev := "-"
			if c.PrevFound {
				prev = string(c.PrevValue)
			}
			if c.Deleted {
				changes = append(changes, fmt.Sprintf("%s deleted(%s)@%d", c.Key, prev, c.Version.WallTime))
			} else {
				changes = append(changes, fmt.Sprintf("%s=%s(%s)@%d", c.Key, c.Value, prev, c.Version.WallTime))
			}
		}
	}
	return changes, complete, frontier
}

func (s *sink) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.batches)
}

// TestFeedReportsAppliedChanges: while its range is watched, a replica
// hands over each write's changes with the batch that holds them, one per
// key and version as the engine holds them (a key written twice by one
// batch once, with the value before the batch as its previous value; a
// delete of an absent key none; a range delete one per live key); while
// it is not watched, its batches are reported incomplete.
func TestFeedReportsAppliedChanges(t *testing.T) {
	sk := &sink{}
	s := newStoreConfig(t, rangesm.Config{Feed: sk})
	s.propose(user, put("a", "0", ts(100, 0)))
	mark := sk.mark()
	s.propose(user, put("a", "1", ts(110, 0)))
	if changes, complete, _ := sk.since(mark); complete || len(changes) != 0 {
		t.Fatalf("unwatched: changes %v, complete %v; want none, incomplete", changes, complete)
	}

	sk.watched.Store(true)
	mark = sk.mark()
	batch := &command.Command{Header: command.Header{Timestamp: ts(120, 0)}, Kind: command.KindBatch, Mutations: []command.Mutation{
		{Kind: command.KindPut, Key: []byte("a"), Value: []byte("2")},
		{Kind: command.KindPut, Key: []byte("a"), Value: []byte("3")},
		{Kind: command.KindPut, Key: []byte("r1"), Value: []byte("x")},
		{Kind: command.KindPut, Key: []byte("r2"), Value: []byte("y")},
		{Kind: command.KindDelete, Key: []byte("absent")},
	}}
	s.propose(user, batch)
	dr := &command.Command{Header: command.Header{Timestamp: ts(130, 0)}, Kind: command.KindDeleteRange, Mutations: []command.Mutation{
		{Kind: command.KindDeleteRange, Key: []byte("r"), Value: []byte("s")},
	}}
	s.propose(user, dr)
	changes, complete, frontier := sk.since(mark)
	want := "a=3(1)@120 r1=x(-)@120 r2=y(-)@120 r1 deleted(x)@130 r2 deleted(y)@130"
	if got := strings.Join(changes, " "); got != want || !complete || frontier != ts(130, 0) {
		t.Fatalf("watched: %s (complete %v, frontier %v)\nwant %s", got, complete, frontier, want)
	}
}
