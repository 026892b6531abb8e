package rangesm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// A range's MVCC state (docs/versions.md, "The frontier rule"): replicated,
// changed only at apply time, the same on every replica at the same
// applied index.
//
//   - The frontier F is the highest of every version applied on the range
//     and every timestamp closed on it. A write command with proposal
//     timestamp T applies at v = max(T, F.Next()), every mutation of it at
//     v, and sets F = v; a Close(ts) sets F = max(F, ts). So versions
//     within a range strictly increase in log order, and once a replica has
//     applied up to a point where F >= ts, every version at or below ts the
//     range will ever hold is there: a read at ts <= F is stable, and any
//     replica that has applied that far may serve it.
//   - The GC threshold G: reads below it are refused (versions below it
//     may be gone). Only raised, by a GC command (gc.go), and never above
//     F, so no write can land at or below it.
//
// The record lives at keys.MVCCStateKey, range-local, so snapshots carry
// it; a split's right-hand range starts with its left-hand range's state,
// a merge keeps the higher of each. It also holds the range's MVCC stats
// (mvcc_stats.go): both change with nearly every write, and one record per
// range and apply batch instead of two is fewer engine records and bytes
// per write, which counts once writes spread over many ranges (issue 22).
//
//	mvcc state := 0x02 through:uvarint frontier:timestamp gc_threshold:timestamp
//	              keys:varint versions:varint bytes:varint live_keys:varint live_bytes:varint
//	            | 0x01 through:uvarint frontier:timestamp gc_threshold:timestamp
//	timestamp  := hlc.Encode (12 bytes)
//
// Version 0x01, written before, holds no stats: they are then in their own
// record (keys.MVCCStatsKey), which the first version 0x02 record written
// over it deletes in the same batch. A range whose record is missing (new)
// has the zero state and stats.
//
// through is the index of the last entry that changed the state (a write,
// a close or a GC; so the record depends on the log alone). The record is
// staged into the batch that holds that entry's writes (at the end of the
// group of entries, or before a batch cut early), so an entry at or below
// through that a restart applies again (a crash after an early cut and
// before the group's applied index was written) already has its versions
// in the engine: a client write or a close there is skipped rather than
// applied a second time at a higher version, and a GC rather than
// collecting a second chunk that its other replicas did not.
type mvccState struct {
	through     uint64
	frontier    hlc.Timestamp
	gcThreshold hlc.Timestamp
}

const (
	mvccStateVersion1 byte = 0x01 // no stats: read only
	mvccStateVersion  byte = 0x02
)

// encodeMVCCRecord returns the record of state s and stats.
func encodeMVCCRecord(s mvccState, stats mvcc.Stats) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+2*hlc.EncodedLen+5*binary.MaxVarintLen64)
	b = append(b, mvccStateVersion)
	b = binary.AppendUvarint(b, s.through)
	b = s.frontier.AppendEncode(b)
	b = s.gcThreshold.AppendEncode(b)
	return appendMVCCStats(b, stats)
}

// decodeMVCCState decodes a record; hasStats is false for a version 0x01
// record, whose stats are in their own record.
func decodeMVCCState(v []byte) (s mvccState, stats mvcc.Stats, hasStats bool, err error) {
	if len(v) < 2 || (v[0] != mvccStateVersion && v[0] != mvccStateVersion1) {
		return mvccState{}, mvcc.Stats{}, false, fmt.Errorf("mvcc state of %d bytes, version %x", len(v), v[:min(len(v), 1)])
	}
	through, n := binary.Uvarint(v[1:])
	if n <= 0 || len(v) < 1+n+2*hlc.EncodedLen || (v[0] == mvccStateVersion1 && len(v) != 1+n+2*hlc.EncodedLen) {
		return mvccState{}, mvcc.Stats{}, false, fmt.Errorf("mvcc state of %d bytes", len(v))
	}
	rest := v[1+n:]
	f, err := hlc.Decode(rest[:hlc.EncodedLen])
	if err != nil {
		return mvccState{}, mvcc.Stats{}, false, fmt.Errorf("mvcc state frontier: %w", err)
	}
	g, err := hlc.Decode(rest[hlc.EncodedLen : 2*hlc.EncodedLen])
	if err != nil {
		return mvccState{}, mvcc.Stats{}, false, fmt.Errorf("mvcc state GC threshold: %w", err)
	}
	s = mvccState{through: through, frontier: f, gcThreshold: g}
	if v[0] == mvccStateVersion1 {
		return s, mvcc.Stats{}, false, nil
	}
	if stats, err = decodeMVCCStatsVarints(rest[2*hlc.EncodedLen:]); err != nil {
		return mvccState{}, mvcc.Stats{}, false, err
	}
	return s, stats, true, nil
}

// loadMVCCState reads rangeID's MVCC state and stats (the zero state and
// stats if it has none: a new range). legacy is true when the stats came
// from their own record (a version 0x01 state), which the next staging of
// the state deletes.
func loadMVCCState(r logstore.Reader, rangeID uint64) (s mvccState, stats mvcc.Stats, legacy bool, err error) {
	v, err := r.Get(keys.MVCCStateKey(rangeID))
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return mvccState{}, mvcc.Stats{}, false, err
	}
	if err == nil {
		var hasStats bool
		if s, stats, hasStats, err = decodeMVCCState(v); err != nil {
			return mvccState{}, mvcc.Stats{}, false, fmt.Errorf("range %d: %w", rangeID, err)
		}
		if hasStats {
			return s, stats, false, nil
		}
	}
	stats, legacy, err = loadMVCCStats(r, rangeID)
	return s, stats, legacy, err
}

// MVCCState is a range's MVCC state as of the last batch its replica
// wrote to the engine (Range.MVCCState): every version at or below
// Frontier the range will ever hold is in the engine.
type MVCCState struct {
	// Frontier: reads at or below it are stable and may be served by this
	// replica.
	Frontier hlc.Timestamp
	// GCThreshold: reads below it are refused (mvcc.CheckReadTimestamp).
	// A GC raises it here as soon as it applies, before its deletes reach
	// the engine (gc.go): a read must open its engine view first and
	// check its timestamp against GCThreshold after.
	GCThreshold hlc.Timestamp
	// Stats are the MVCC stats of the range's user data (mvcc_stats.go).
	Stats mvcc.Stats
	// Intents is the number of intents in the range's lock table
	// (intent.go): reads look intents up only when it is not zero.
	Intents int
	// FeedFrontier is what change feeds may report (feed.go): Frontier,
	// or just below the lowest provisional version of the range's
	// intents while it holds any.
	FeedFrontier hlc.Timestamp
}

// MVCCState returns the range's MVCC state as of its last written batch.
// Safe to call without the replica's raftMu (the serving path does).
func (r *Range) MVCCState() MVCCState {
	if p := r.published.Load(); p != nil {
		return *p
	}
	return MVCCState{}
}

// publish makes the applied MVCC state visible to readers.
// REQUIRES: the replica's raftMu, and every write it covers in the engine.
func (r *Range) publish() {
	p := &MVCCState{Frontier: r.st.frontier, GCThreshold: r.st.gcThreshold, Stats: r.stats, Intents: r.intents,
		FeedFrontier: r.feedFrontier()}
	old := r.published.Load()
	if old != nil && *old == *p {
		r.publishFeed(p.FeedFrontier)
		return
	}
	r.published.Store(p)
	r.publishFeed(p.FeedFrontier)
	if r.observe != nil && !p.Frontier.IsZero() && (old == nil || old.Frontier != p.Frontier) {
		r.observe(p.Frontier)
	}
}

// nextVersion returns the version a write with proposal timestamp t
// applies at, max(t, F.Next()), or false if the frontier is at the largest
// timestamp (no version is above it; a close that high is refused by the
// node, so this is only a guard).
// REQUIRES: the replica's raftMu.
func (r *Range) nextVersion(t hlc.Timestamp) (hlc.Timestamp, bool) {
	if r.st.frontier == hlc.MaxTimestamp {
		return hlc.Timestamp{}, false
	}
	return t.Forward(r.st.frontier.Next()), true
}

// advance records that the entry being applied changed the state.
// REQUIRES: the replica's raftMu.
func (r *Range) advance(frontier hlc.Timestamp) {
	r.st.frontier = r.st.frontier.Forward(frontier)
	r.st.through = r.applying
	r.stDirty = true
}

// stageMVCCState stages the record if the state or the stats
// (mvcc_stats.go) changed since it was last staged.
// REQUIRES: the replica's raftMu.
func (r *Range) stageMVCCState() {
	r.countWriter()
	if !r.stDirty && !r.statsDirty {
		return
	}
	r.stDirty, r.statsDirty = false, false
	r.ov.put(keys.MVCCStateKey(r.rangeID), encodeMVCCRecord(r.st, r.stats))
	if r.legacyStats {
		r.ov.del(keys.MVCCStatsKey(r.rangeID))
		r.legacyStats = false
	}
}

// skipApplied reports whether entry index, of kind k, had its writes
// written with the MVCC state already (see through above).
// REQUIRES: the replica's raftMu.
func (r *Range) skipApplied(index uint64, k command.Kind) bool {
	return index <= r.st.through && (k.IsWrite() || k == command.KindClose || k == command.KindGC ||
		k == command.KindTxnRecord || k == command.KindTxnPrevent)
}
