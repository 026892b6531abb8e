package node

import (
	"context"
	"time"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/rangesm"
)

// Watches and abandoned intents (docs/watch.md, "Intents").
//
// A range's feed frontier stays below its lowest intent (rangesm/feed.go),
// so an intent whose transaction is never resolved holds back every
// watcher of the range, events of other keys included. Readers and
// writers that meet an intent push its transaction (txn_intents.go), but
// a watched range may see neither: a coordinator that died, or whose
// resolution was lost to a leader change, after the last client touched
// the key leaves the watchers stalled for good. So the leader of a range
// with watchers pushes, every watchIntentPushEvery, the intents older
// than txnExpiry, as a write would (hlc.MaxTimestamp: committed and
// aborted transactions are resolved, expired ones recovered, live ones
// left to their coordinator).

// watchIntentPushEvery is how often a watched range's old intents are
// pushed.
const watchIntentPushEvery = time.Second

// watchIntentPushMax bounds the intents one pass pushes per range.
const watchIntentPushMax = 256

func (n *Node) watchIntentLoop() {
	defer n.bgWG.Done()
	t := time.NewTicker(watchIntentPushEvery)
	defer t.Stop()
	for {
		select {
		case <-n.bgCtx.Done():
			return
		case <-t.C:
		}
		for _, id := range n.watches.watchedRanges() {
			n.pushWatchedIntents(id)
		}
	}
}

// pushWatchedIntents pushes range id's intents older than txnExpiry, if
// this node leads it.
func (n *Node) pushWatchedIntents(id uint64) {
	r, err := n.store.Replica(id)
	if err != nil || !r.IsLeader() || mvccState(r).Intents == 0 {
		return
	}
	old := hlc.Timestamp{WallTime: n.clock.PhysicalNow() - txnExpiry.Nanoseconds()}
	ins, err := rangesm.IntentsBelow(n.db, id, old, watchIntentPushMax)
	if err != nil || len(ins) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(n.bgCtx, 2*watchIntentPushEvery)
	defer cancel()
	if n.pushIntents(ctx, ins, hlc.MaxTimestamp) {
		n.log.Info("pushed old intents holding back watchers", "range", id, "intents", len(ins))
	}
}
