package rangesm

import (
	"errors"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// The timestamp oracle's persisted window (docs/versions.md, "How the
// oracle works"): a wall time, in Unix nanoseconds, that no timestamp the
// oracle issued is above. It is a meta counter that only rises; the
// oracle raises it through meta's Raft log before it issues above it, and
// a new oracle starts above it.

// tsoWindowCounter names the window's meta counter.
const tsoWindowCounter = "tso-window"

// applyTSOWindow raises the window to cmd.TSOWindow if it is below, and
// reports the window it found (Result.NodeID).
// REQUIRES: the replica's raftMu.
func (r *Range) applyTSOWindow(cmd *command.Command) (command.Result, error) {
	if r.rangeID != keys.MetaRangeID {
		return command.Result{Code: command.CodeNotMeta}, nil
	}
	prev, err := r.readCounter(tsoWindowCounter)
	if err != nil {
		return command.Result{}, err
	}
	if w := uint64(cmd.TSOWindow); w > prev {
		r.ov.put(keys.CounterKey(tsoWindowCounter), encodeCounter(w))
	}
	return command.Result{NodeID: prev}, nil
}

// TSOWindow returns the oracle's persisted window in r, a node's copy of
// meta (0 if none was ever persisted). The copy may lag meta's leader.
func TSOWindow(r logstore.Reader) (int64, error) {
	v, err := r.Get(keys.CounterKey(tsoWindowCounter))
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	w, err := decodeCounter(v)
	return int64(w), err
}
