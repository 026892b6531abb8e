package raft

import (
	"bytes"
	"errors"

	"github.com/shaledb/shale/storage"
)

// applyState is a replica's apply batch plus an overlay of the writes
// staged in it, so that a command applied after another in the same batch
// reads the other's writes (a CAS after a Put of the same key, a dedup
// lookup after the first attempt's record). Reads fall through to the
// engine, which holds exactly the applied state before the batch.
//
// REQUIRES: the owning replica's raftMu.
type applyState struct {
	db    *storage.DB
	batch *storage.Batch
	// points holds the last point write of each key; ranges every range
	// deletion, in order; seq orders the two.
	points map[string]overlayPoint
	ranges []overlayRange
	seq    int
}

type overlayPoint struct {
	value   []byte
	deleted bool
	seq     int
}

type overlayRange struct {
	start, end []byte
	seq        int
}

func (a *applyState) init(db *storage.DB) {
	a.db = db
	a.batch = storage.NewBatch(4 << 10)
	a.points = make(map[string]overlayPoint)
}

// reset empties the batch and the overlay (after the batch was written).
func (a *applyState) reset() {
	a.batch.Reset()
	clear(a.points)
	a.ranges = a.ranges[:0]
	a.seq = 0
}

func (a *applyState) put(key, value []byte) {
	a.batch.Put(key, value)
	a.seq++
	a.points[string(key)] = overlayPoint{value: value, seq: a.seq}
}

func (a *applyState) del(key []byte) {
	a.batch.Delete(key)
	a.seq++
	a.points[string(key)] = overlayPoint{deleted: true, seq: a.seq}
}

func (a *applyState) delRange(start, end []byte) {
	if bytes.Compare(start, end) >= 0 {
		return
	}
	a.batch.DeleteRange(start, end)
	a.seq++
	a.ranges = append(a.ranges, overlayRange{start: start, end: end, seq: a.seq})
}

// get reads key as of the writes staged so far. found is false for a
// missing key. The value must not be modified.
func (a *applyState) get(key []byte) (value []byte, found bool, err error) {
	p, ok := a.points[string(key)]
	for i := len(a.ranges) - 1; i >= 0; i-- {
		rg := a.ranges[i]
		if ok && rg.seq < p.seq {
			break
		}
		if bytes.Compare(key, rg.start) >= 0 && bytes.Compare(key, rg.end) < 0 {
			return nil, false, nil
		}
	}
	if ok {
		if p.deleted {
			return nil, false, nil
		}
		return p.value, true, nil
	}
	v, err := a.db.Get(key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// flush writes the staged batch (without sync: the Raft log is durable
// and applying is deterministic, so a crash re-applies from the applied
// index) and empties the overlay, so later reads may go to the engine
// directly.
func (a *applyState) flush() error {
	if a.batch.Empty() {
		a.reset()
		return nil
	}
	if err := a.db.Write(a.batch, storage.WriteOptions{}); err != nil {
		return err
	}
	a.reset()
	return nil
}
