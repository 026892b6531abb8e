package rangesm

import (
	"bytes"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaledb/shale/storage"
)

// overlay is a replica's apply batch plus an overlay of the writes
// staged in it, so that a command applied after another in the same batch
// reads the other's writes (a CAS after a Put of the same key, a dedup
// lookup after the first attempt's record). Reads fall through to the
// engine, which holds exactly the applied state before the batch.
//
// Most batches are never read from (client writes whose dedup state is
// cached, dedup_cache.go), so staging a write only appends it to a list;
// the map from key to last write is built when a read first needs it and
// kept up to date from then on. A map that grew large is dropped rather
// than cleared, since clearing costs its capacity, not its length.
//
// REQUIRES: the owning replica's raftMu.
type overlay struct {
	db    *storage.DB
	batch *storage.Batch
	// write writes a batch to db (Store.writeEngine: it waits out a full
	// disk).
	write func(*storage.Batch, storage.WriteOptions) error
	// writes counts the engine writes made (apply_writes_total).
	writes prometheus.Counter
	// points holds the point writes staged, in order; their keys are
	// copied into keys (values are kept as given: the caller must not
	// modify them until the batch is written).
	points []overlayPoint
	keys   []byte
	// index maps a key to the position in points of its last write, for
	// points[:indexed]; nil until a read needs it.
	index   map[string]int
	indexed int
	// ranges holds every range deletion, in order; seq orders them and
	// the point writes.
	ranges []overlayRange
	seq    int
}

type overlayPoint struct {
	keyStart, keyEnd int // in overlay.keys
	value            []byte
	deleted          bool
	seq              int
}

type overlayRange struct {
	start, end []byte
	seq        int
}

// overlayScanMax is the number of staged writes below which a read scans
// them instead of building the index.
const overlayScanMax = 16

// overlayIndexKeep is the largest index that is cleared for reuse; a
// larger one is dropped.
const overlayIndexKeep = 256

func (a *overlay) init(db *storage.DB, write func(*storage.Batch, storage.WriteOptions) error, writes prometheus.Counter) {
	a.db = db
	a.write = write
	a.writes = writes
	// No buffer until the first write: most replicas of a node with many
	// ranges are idle (docs/replication.md, "Memory per replica").
	a.batch = &storage.Batch{}
}

// release frees the buffers reset keeps for the next batch, for a range
// going to rest. REQUIRES: the batch written (reset since).
func (a *overlay) release() {
	a.batch.Release()
	a.points, a.keys, a.index, a.ranges = nil, nil, nil, nil
}

// reset empties the batch and the overlay (after the batch was written).
func (a *overlay) reset() {
	a.batch.Reset()
	clear(a.points) // drop the values
	a.points = a.points[:0]
	a.keys = a.keys[:0]
	if len(a.index) > overlayIndexKeep {
		a.index = nil
	} else {
		clear(a.index)
	}
	a.indexed = 0
	a.ranges = a.ranges[:0]
	a.seq = 0
}

func (a *overlay) stage(key, value []byte, deleted bool) {
	a.seq++
	start := len(a.keys)
	a.keys = append(a.keys, key...)
	a.points = append(a.points, overlayPoint{keyStart: start, keyEnd: len(a.keys), value: value, deleted: deleted, seq: a.seq})
}

func (a *overlay) put(key, value []byte) {
	a.batch.Put(key, value)
	a.stage(key, value, false)
}

func (a *overlay) del(key []byte) {
	a.batch.Delete(key)
	a.stage(key, nil, true)
}

func (a *overlay) delRange(start, end []byte) {
	if bytes.Compare(start, end) >= 0 {
		return
	}
	a.batch.DeleteRange(start, end)
	a.seq++
	a.ranges = append(a.ranges, overlayRange{start: start, end: end, seq: a.seq})
}

// lastWrite returns the last point write staged for key.
func (a *overlay) lastWrite(key []byte) (overlayPoint, bool) {
	if len(a.points) <= overlayScanMax && a.index == nil {
		for i := len(a.points) - 1; i >= 0; i-- {
			p := a.points[i]
			if bytes.Equal(a.keys[p.keyStart:p.keyEnd], key) {
				return p, true
			}
		}
		return overlayPoint{}, false
	}
	if a.index == nil {
		a.index = make(map[string]int, len(a.points))
	}
	for ; a.indexed < len(a.points); a.indexed++ {
		p := a.points[a.indexed]
		a.index[string(a.keys[p.keyStart:p.keyEnd])] = a.indexed
	}
	i, ok := a.index[string(key)]
	if !ok {
		return overlayPoint{}, false
	}
	return a.points[i], true
}

// get reads key as of the writes staged so far. found is false for a
// missing key. The value must not be modified.
func (a *overlay) get(key []byte) (value []byte, found bool, err error) {
	p, ok := a.lastWrite(key)
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
func (a *overlay) flush() error {
	if a.batch.Empty() {
		a.reset()
		return nil
	}
	if err := a.write(a.batch, storage.WriteOptions{}); err != nil {
		return err
	}
	a.writes.Inc()
	a.reset()
	return nil
}
