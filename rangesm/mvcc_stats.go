package rangesm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// A range's MVCC stats (docs/versions.md, "Retention window and garbage
// collection"; docs/sharding.md, "Size accounting"): the mvcc.Stats of its
// user data, which range sizes and split and merge decisions go by (live
// bytes) and the GC queue reads (history to collect). They are replicated
// state, changed only at apply time and the same on every replica at the
// same applied index:
//
//   - a write adds what its Writer says it changed (mvcc.Writer.Delta);
//   - a GC chunk adds its result's delta (gc.go);
//   - a split counts the right-hand half from its data (ComputeStats) and
//     leaves the left-hand half the rest;
//   - a merge adds the right-hand range's stats.
//
// They are staged with the MVCC state (mvcc_state.go), in the same record,
// so the engine never holds versions its stats do not count, and an entry
// that a restart skips (at or below the state's through) has its delta
// counted already.
//
//	stats := keys:varint versions:varint bytes:varint
//	         live_keys:varint live_bytes:varint
//
// (varint: encoding/binary's signed varint), at the end of the MVCC state
// record. Ranges written before had them in their own record:
//
//	mvcc stats := 0x01 stats
//
// which is read when the MVCC state record is of version 0x01 and deleted
// when the state is next staged.

const mvccStatsVersion byte = 0x01

func appendMVCCStats(b []byte, s mvcc.Stats) []byte {
	for _, v := range []int64{s.Keys, s.Versions, s.Bytes, s.LiveKeys, s.LiveBytes} {
		b = binary.AppendVarint(b, v)
	}
	return b
}

// encodeMVCCStats returns a stats record of the old layout (tests write
// ranges as they were).
func encodeMVCCStats(s mvcc.Stats) []byte {
	return appendMVCCStats([]byte{mvccStatsVersion}, s)
}

func decodeMVCCStats(v []byte) (mvcc.Stats, error) {
	if len(v) < 1 || v[0] != mvccStatsVersion {
		return mvcc.Stats{}, fmt.Errorf("mvcc stats of %d bytes, version %x", len(v), v[:min(len(v), 1)])
	}
	return decodeMVCCStatsVarints(v[1:])
}

func decodeMVCCStatsVarints(rest []byte) (mvcc.Stats, error) {
	var s mvcc.Stats
	for _, p := range []*int64{&s.Keys, &s.Versions, &s.Bytes, &s.LiveKeys, &s.LiveBytes} {
		x, n := binary.Varint(rest)
		if n <= 0 {
			return mvcc.Stats{}, errors.New("mvcc stats: bad varint")
		}
		*p, rest = x, rest[n:]
	}
	if len(rest) != 0 {
		return mvcc.Stats{}, fmt.Errorf("mvcc stats: %d trailing bytes", len(rest))
	}
	return s, nil
}

// loadMVCCStats reads rangeID's stats record of the old layout (zero, and
// found false, if it has none).
func loadMVCCStats(r logstore.Reader, rangeID uint64) (s mvcc.Stats, found bool, err error) {
	v, err := r.Get(keys.MVCCStatsKey(rangeID))
	if errors.Is(err, storage.ErrNotFound) {
		return mvcc.Stats{}, false, nil
	}
	if err != nil {
		return mvcc.Stats{}, false, err
	}
	s, err = decodeMVCCStats(v)
	if err != nil {
		return mvcc.Stats{}, false, fmt.Errorf("range %d: %w", rangeID, err)
	}
	return s, true, nil
}

// addStats adds d to the range's stats.
// REQUIRES: the replica's raftMu.
func (r *Range) addStats(d mvcc.Stats) {
	if d == (mvcc.Stats{}) {
		return
	}
	r.stats.Add(d)
	r.statsDirty = true
}

// countWriter adds what the batch's Writer changed since it was last
// counted (its Delta is the sum of every write through it).
// REQUIRES: the replica's raftMu.
func (r *Range) countWriter() {
	if r.w == nil {
		return
	}
	d := r.w.Delta()
	r.addStats(sub(d, r.wCounted))
	r.wCounted = d
}

// sub returns a - b.
func sub(a, b mvcc.Stats) mvcc.Stats {
	return mvcc.Stats{Keys: a.Keys - b.Keys, Versions: a.Versions - b.Versions, Bytes: a.Bytes - b.Bytes,
		LiveKeys: a.LiveKeys - b.LiveKeys, LiveBytes: a.LiveBytes - b.LiveBytes}
}
