package rangesm

import (
	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
)

// Change feeds (docs/watch.md): while a range has watchers on this node,
// its replica collects the changes its writes make to user keys as it
// applies them (mvcc.Writer.OnChange) and hands them to the node's
// FeedSink when it publishes the batch that holds them, together with the
// new frontier. Collecting costs a copy of each changed key and value, so
// it is done only for watched ranges; a batch applied (in whole or part)
// without collecting, or state that came by snapshot, is reported as
// incomplete, and a watcher then reads the versions up to the new frontier
// from history instead.
//
// Intents (intent.go) hold the feed back: a transaction's intent at p
// becomes a version at its commit timestamp C >= p when it resolves,
// below the range's frontier by then. While a range holds intents (and
// in the batch that resolves its last one) its batches are reported
// incomplete, with the feed frontier held below the lowest p of its
// intents (MVCCState.FeedFrontier): watchers read history in version
// order up to there, and the versions a resolution writes are above
// everything they were told.

// FeedSink receives the changes a replica applies (Config.Feed).
type FeedSink interface {
	// Watched reports whether rangeID has watchers on this node. Called at
	// the start of every Apply, on the apply path: it must be cheap and
	// must not block.
	Watched(rangeID uint64) bool
	// Applied is called each time the replica publishes a batch (its
	// versions are in the engine and MVCCState shows frontier). changes
	// are the batch's changes to user keys in version order (one per key
	// and version, what the engine holds), complete says they are every
	// change of the batch (else the sink must read history up to
	// frontier), desc is the range's descriptor. changes are the sink's
	// to keep. On the apply path: it must be cheap and must not block.
	Applied(rangeID uint64, desc *kvpb.RangeDescriptor, changes []mvcc.Change, frontier hlc.Timestamp, complete bool)
}

// feedState is a replica's collection of changes for its FeedSink.
type feedState struct {
	// collecting: this Apply collects changes; incomplete: some of the
	// batch was applied without.
	collecting bool
	incomplete bool
	changes    []mvcc.Change
	// at indexes changes by key for the version of the last change (a
	// later write of a key at the same version replaces the earlier).
	at    map[string]int
	atVer hlc.Timestamp
	// held: the range held intents at the last publish.
	held bool
}

// startFeed decides whether the Apply about to run collects changes.
// REQUIRES: the replica's raftMu.
func (r *Range) startFeed() {
	if r.sink == nil {
		return
	}
	r.feed.collecting = r.sink.Watched(r.rangeID)
	if !r.feed.collecting {
		r.feed.incomplete = true
	}
}

// onChange collects one change (mvcc.Writer.OnChange).
func (r *Range) onChange(c mvcc.Change) {
	f := &r.feed
	if f.at == nil || f.atVer != c.Version {
		clear(f.at)
		if f.at == nil {
			f.at = make(map[string]int)
		}
		f.atVer = c.Version
	}
	if i, ok := f.at[string(c.Key)]; ok {
		f.changes[i] = c
		return
	}
	f.at[string(c.Key)] = len(f.changes)
	f.changes = append(f.changes, c)
}

// publishFeed hands the published batch's changes to the sink.
// REQUIRES: the replica's raftMu, and the batch in the engine.
func (r *Range) publishFeed(frontier hlc.Timestamp) {
	if r.sink == nil {
		return
	}
	f := &r.feed
	if r.intents > 0 || f.held {
		f.incomplete = true
	}
	f.held = r.intents > 0
	r.sink.Applied(r.rangeID, r.desc, f.changes, frontier, !f.incomplete)
	f.changes, f.incomplete = nil, false
	clear(f.at)
}
