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
// The state and the range's MVCC stats (mvcc_stats.go) are one record,
// range-local, so snapshots carry it; a split's right-hand range starts
// with its left-hand range's state, a merge keeps the higher of each. The
// record is written inside the range's applied state record
// (keys.AppliedStateKey, logstore.EncodeAppliedState), which replication
// writes with every apply batch anyway (Range.AppliedState): the applied
// state, the MVCC state and the stats change with nearly every write, and
// one record per range and apply batch instead of three is fewer engine
// records and bytes per write, which counts once writes spread over many
// ranges (issue 22).
//
//	mvcc state := 0x02 through:uvarint frontier:timestamp gc_threshold:timestamp
//	              keys:varint versions:varint bytes:varint live_keys:varint live_bytes:varint
//	            | 0x01 through:uvarint frontier:timestamp gc_threshold:timestamp
//	timestamp  := hlc.Encode (12 bytes)
//
// A range whose applied state record holds no state machine state (its
// version 0x01: bootstrap, a split's right-hand range, ranges written
// before) has its state in its own record at keys.MVCCStateKey: version
// 0x02 (a split's right-hand range), or 0x01, with the stats then in
// their own record at keys.MVCCStatsKey. The first applied state written
// with the state deletes those records in the same batch. A range with
// neither (new) has the zero state and stats.
//
// through is the index of the last entry that changed the state (a write,
// a close or a GC; so the record depends on the log alone). The record is
// staged into the batch that holds that entry's writes (at the end of the
// group of entries, with the group's applied index, or before a batch cut
// early, with the applied index of the group before), so an entry at or
// below through that a restart applies again (a crash after an early cut
// and before the group's applied index was written) already has its
// versions in the engine: a client write or a close there is skipped
// rather than applied a second time at a higher version, and a GC rather
// than collecting a second chunk that its other replicas did not.
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
// stats if it has none: a new range) and its applied position. legacy is
// true when they came from records of their own (not the applied state),
// which the next staging of the state deletes.
func loadMVCCState(r logstore.Reader, rangeID uint64) (s mvccState, stats mvcc.Stats, applied logstore.LogPosition, legacy bool, err error) {
	v, err := r.Get(keys.AppliedStateKey(rangeID))
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return mvccState{}, mvcc.Stats{}, applied, false, err
	}
	if err == nil {
		machine, hasMachine := []byte(nil), false
		if applied, machine, hasMachine, err = logstore.DecodeAppliedState(v); err != nil {
			return mvccState{}, mvcc.Stats{}, applied, false, fmt.Errorf("range %d: %w", rangeID, err)
		}
		if hasMachine {
			var hasStats bool
			if s, stats, hasStats, err = decodeMVCCState(machine); err == nil && !hasStats {
				err = errors.New("mvcc state without stats in the applied state")
			}
			if err != nil {
				return mvccState{}, mvcc.Stats{}, applied, false, fmt.Errorf("range %d: %w", rangeID, err)
			}
			return s, stats, applied, false, nil
		}
	}
	v, err = r.Get(keys.MVCCStateKey(rangeID))
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return mvccState{}, mvcc.Stats{}, applied, false, err
	}
	if err == nil {
		legacy = true
		var hasStats bool
		if s, stats, hasStats, err = decodeMVCCState(v); err != nil {
			return mvccState{}, mvcc.Stats{}, applied, false, fmt.Errorf("range %d: %w", rangeID, err)
		}
		if hasStats {
			return s, stats, applied, true, nil
		}
	}
	stats, found, err := loadMVCCStats(r, rangeID)
	return s, stats, applied, legacy || found, err
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

// stageMVCCState stages the state and stats, if they changed since they
// were last staged, before the apply batch is written early: in the
// applied state record, with the applied position of the last group
// (the group being applied has not finished).
// REQUIRES: the replica's raftMu.
func (r *Range) stageMVCCState() {
	r.countWriter()
	if !r.stDirty && !r.statsDirty {
		return
	}
	r.ov.put(keys.AppliedStateKey(r.rangeID), logstore.EncodeAppliedState(r.applied, r.stateRecord()))
}

// stateRecord encodes the state and stats, which are then staged, and
// stages the deletion of the records they came from, if of their own.
// REQUIRES: the replica's raftMu.
func (r *Range) stateRecord() []byte {
	r.stDirty, r.statsDirty = false, false
	if r.legacyState {
		r.ov.del(keys.MVCCStateKey(r.rangeID))
		r.ov.del(keys.MVCCStatsKey(r.rangeID))
		r.legacyState = false
	}
	return encodeMVCCRecord(r.st, r.stats)
}

// AppliedState implements apply.StateMachine: the MVCC state and stats
// go in the applied state record.
// REQUIRES: the replica's raftMu.
func (r *Range) AppliedState(index, term uint64) []byte {
	r.countWriter()
	r.applied = logstore.LogPosition{Index: index, Term: term}
	return r.stateRecord()
}

// skipApplied reports whether entry index, of kind k, had its writes
// written with the MVCC state already (see through above).
// REQUIRES: the replica's raftMu.
func (r *Range) skipApplied(index uint64, k command.Kind) bool {
	return index <= r.st.through && (k.IsWrite() || k == command.KindClose || k == command.KindGC ||
		k == command.KindTxnRecord || k == command.KindTxnPrevent)
}
