package rangesm

import (
	"bytes"
	"fmt"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft/keys"
)

// Garbage collection of old versions, as applied (docs/versions.md,
// "Retention window and garbage collection"; the GC queue that proposes it
// is node/gc_queue.go). A GC command raises the range's threshold and
// deletes one chunk of the versions below it, bounded by the command's
// MaxDeletes and MaxKeys so that applying it holds the range's other
// commands up only briefly; its result says where the next chunk starts
// and the lowest threshold at which a version it kept would be collected
// (mvcc.GCResult.Collectible), which the queue uses to skip passes that
// would collect nothing.
// What it deletes depends only on the command and the applied data, so
// every replica deletes the same versions.

// applyGC applies a GC command.
// REQUIRES: the replica's raftMu.
func (r *Range) applyGC(cmd *command.Command) (command.Result, error) {
	g := &cmd.GC
	switch {
	case r.rangeID == keys.MetaRangeID:
		return command.Result{Code: command.CodeMalformed, Message: "the meta range keeps no versions to collect"}, nil
	case g.Threshold.IsZero():
		return command.Result{Code: command.CodeMalformed, Message: "GC without a threshold"}, nil
	case len(g.End) != 0 && bytes.Compare(g.Start, g.End) > 0:
		return command.Result{Code: command.CodeMalformed, Message: fmt.Sprintf("GC span [%q, %q) ends before it starts", g.Start, g.End)}, nil
	}
	// The range may have split or merged since the proposal: collect only
	// what is in it now.
	d := r.desc
	start, end := g.Start, g.End
	if bytes.Compare(start, d.GetStartKey()) < 0 {
		start = d.GetStartKey()
	}
	if len(d.GetEndKey()) != 0 && (len(end) == 0 || bytes.Compare(end, d.GetEndKey()) > 0) {
		end = d.GetEndKey()
	}
	if len(end) == 0 {
		end = nil // the keyspace's end
	}
	// GC reads the engine: write the entries before this one first, with
	// the MVCC state and stats they changed.
	if err := r.flush(); err != nil {
		return command.Result{}, err
	}
	r.raiseGCThreshold(g.Threshold)
	// Published at once, before the deletes it allows are written: a read
	// that opens its engine view after them and checks its timestamp
	// after that sees the new threshold. Everything else the state holds
	// is in the engine (the flush above), so it is published with it: a
	// read never sees a threshold above the frontier it is told.
	r.publish()
	// A restart that applies this entry again skips it (skipApplied): its
	// deletes are written below with the state that says so.
	r.st.through = r.applying
	r.stDirty = true
	var res mvcc.GCResult
	if end == nil || bytes.Compare(start, end) < 0 {
		var err error
		res, err = keys.UserKeyspace.GC(r.db, r.ov.batch, start, end, r.st.gcThreshold,
			mvcc.GCOptions{MaxDeletes: clampInt(g.MaxDeletes), MaxKeys: clampInt(g.MaxKeys)})
		if err != nil {
			return command.Result{}, fmt.Errorf("range %d: GC at %s: %w", r.rangeID, r.st.gcThreshold, err)
		}
		r.addStats(res.Delta)
	}
	// The deletes go to the engine at once, with the state: the commands
	// after this one then read the engine as GC left it (their Writer's
	// deltas count from there).
	if err := r.flush(); err != nil {
		return command.Result{}, err
	}
	return command.Result{Found: res.Resume != nil, Value: res.Resume, NodeID: uint64(res.VersionsDeleted),
		Version: res.Collectible}, nil
}

// raiseGCThreshold raises the range's GC threshold towards ts, never above
// its frontier: a write applies above the frontier, so with the threshold
// at or below it no write ever lands at or below the threshold and changes
// what a read there saw. (An idle range whose frontier is older than ts
// collects everything but each key's newest version; reads between the
// frontier and ts are served as before.)
// REQUIRES: the replica's raftMu.
func (r *Range) raiseGCThreshold(ts hlc.Timestamp) {
	ts = ts.Backward(r.st.frontier)
	if !r.st.gcThreshold.Less(ts) {
		return
	}
	r.st.gcThreshold = ts
	r.stDirty = true
}

// clampInt converts a command's bound to an int (0: no bound).
func clampInt(v uint64) int {
	const maxInt = int(^uint(0) >> 1)
	if v > uint64(maxInt) {
		return maxInt
	}
	return int(v)
}
