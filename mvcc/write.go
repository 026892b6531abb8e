package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/storage"
)

// ErrWriteTooOld is wrapped by every *WriteTooOldError.
var ErrWriteTooOld = errors.New("mvcc: write at or below an existing version")

// WriteTooOldError refuses a write whose timestamp is at or below the
// key's newest version: writing it would change what a read at that
// version already saw. The caller retries above Existing.
type WriteTooOldError struct {
	Key       []byte
	Timestamp hlc.Timestamp // the refused write's
	Existing  hlc.Timestamp // the key's newest version
}

func (e *WriteTooOldError) Error() string {
	return fmt.Sprintf("%v: key %q at %s, newest version %s", ErrWriteTooOld, e.Key, e.Timestamp, e.Existing)
}

// Unwrap lets errors.Is(err, ErrWriteTooOld) match.
func (e *WriteTooOldError) Unwrap() error { return ErrWriteTooOld }

// ErrInvalidTimestamp is returned (wrapped) for a write at the zero or an
// invalid timestamp.
var ErrInvalidTimestamp = errors.New("mvcc: invalid write timestamp")

// Writer adds versions to a storage.Batch: each write reads the key's
// newest version (from the Reader, or from earlier writes through the same
// Writer) to refuse writes that would rewrite history and to carry the
// version that created the key. The batch is the caller's to apply;
// a Writer is for one batch and one goroutine.
type Writer struct {
	ks Keyspace
	r  Reader
	b  *storage.Batch
	// pending holds the newest version of every key written so far, so
	// that several writes to one key in one batch see each other.
	pending map[string]pendingVersion
	scratch []byte
	// stored is the buffer a version's value is encoded into (the batch
	// copies it).
	stored []byte
	delta  Stats
	// OnChange, if set, is called with each version written, as History
	// would report it (with the previous value). A later write of the
	// same key at the same version replaces the earlier one in the batch:
	// it is reported again, and the caller keeps the last report.
	OnChange func(Change)
}

type pendingVersion struct {
	ts      hlc.Timestamp
	live    bool
	created hlc.Timestamp
	lease   uint64 // the lease a live version is attached to (0: none)
	bytes   int64  // engine key + value bytes
	value   []byte // the user value of a live version
	// prevLive and prevValue: the key's value below ts (for OnChange).
	prevLive  bool
	prevValue []byte
}

// Delta returns how the writes so far change the keyspace's Stats once
// the batch is applied.
func (w *Writer) Delta() Stats { return w.delta }

// account adds to the delta a new version (live, size) of a key whose
// newest version was newest (if ok); replace says the new version takes
// the place of newest (same timestamp, written by this writer).
func (w *Writer) account(newest pendingVersion, ok, replace, live bool, size int64) {
	switch {
	case replace:
		w.delta.Bytes += size - newest.bytes
	case ok:
		w.delta.Versions++
		w.delta.Bytes += size
	default:
		w.delta.Keys++
		w.delta.Versions++
		w.delta.Bytes += size
	}
	if ok && newest.live {
		w.delta.LiveKeys--
		w.delta.LiveBytes -= newest.bytes
	}
	if live {
		w.delta.LiveKeys++
		w.delta.LiveBytes += size
	}
}

// NewWriter returns a Writer adding versions to b, reading the state that
// b will apply over from r. r must not change until b is applied (a
// Snapshot, or a DB whose writes are serialized with this one).
func (ks Keyspace) NewWriter(r Reader, b *storage.Batch) *Writer {
	return &Writer{ks: ks, r: r, b: b, pending: make(map[string]pendingVersion)}
}

// resetMaxPending is the most keys a Writer's bookkeeping may have held for
// Reset to keep its memory: clearing a map costs its capacity, so one
// grown by a large batch is dropped rather than cleared for every later
// (small) one.
const resetMaxPending = 1024

// Reset makes w a Writer adding versions to b over r, as NewWriter would,
// forgetting every earlier write (and OnChange), but keeping the memory of
// its bookkeeping: a replica applies one batch after another, and a new
// Writer's map grew again, by doublings, for every batch (the largest
// allocation of a put's apply).
func (w *Writer) Reset(r Reader, b *storage.Batch) {
	if len(w.pending) > resetMaxPending {
		w.pending = make(map[string]pendingVersion)
	} else {
		clear(w.pending)
	}
	w.r, w.b, w.delta, w.OnChange = r, b, Stats{}, nil
}

// newest returns key's newest version (tombstones included), from this
// writer's earlier writes or the reader.
func (w *Writer) newest(key []byte) (v pendingVersion, ok, fromBatch bool, err error) {
	if p, ok := w.pending[string(key)]; ok {
		return p, true, true, nil
	}
	e, ok, err := w.ks.newestAtOrBelow(w.r, key, hlc.MaxTimestamp)
	if err != nil || !ok {
		return pendingVersion{}, false, false, err
	}
	encLen := len(AppendKeyPrefix(w.scratch[:0], key))
	return pendingVersion{ts: e.ts, live: e.live, created: e.created, lease: e.lease,
		bytes: w.ks.versionBytes(encLen, e.live, e.lease, len(e.value)), value: e.value}, true, false, nil
}

// Get returns key's newest version as this writer sees it: its own
// earlier writes, else the reader's state. found is false when the key has
// none or the newest is a deletion. The value must not be modified.
func (w *Writer) Get(key []byte) (kv KeyValue, found bool, err error) {
	newest, ok, _, err := w.newest(key)
	if err != nil || !ok || !newest.live {
		return KeyValue{}, false, err
	}
	return KeyValue{Key: append([]byte{}, key...), Value: newest.value, Version: newest.ts, Created: newest.created,
		Lease: newest.lease}, true, nil
}

// check refuses a write at ts over newest: allowed above the newest
// version, or at the same version when this writer wrote it (a later
// write in one batch replaces an earlier one).
func check(key []byte, ts hlc.Timestamp, newest pendingVersion, ok, fromBatch bool) error {
	if !ts.Valid() || ts.IsZero() {
		return fmt.Errorf("%w: key %q at %s", ErrInvalidTimestamp, key, ts)
	}
	if !ok || newest.ts.Less(ts) || (fromBatch && newest.ts == ts) {
		return nil
	}
	return &WriteTooOldError{Key: append([]byte{}, key...), Timestamp: ts, Existing: newest.ts}
}

// Put writes value as key's version ts. It returns a *WriteTooOldError if
// key has a version at or above ts (other than one this writer wrote at
// ts), and writes nothing then.
func (w *Writer) Put(key []byte, ts hlc.Timestamp, value []byte) error {
	return w.PutLeased(key, ts, value, 0)
}

// PutLeased is Put of a value attached to lease (0: none): the value
// records the lease, so that the lease's end deletes the key only while
// its newest version is still this lease's (DeleteIfLeased).
func (w *Writer) PutLeased(key []byte, ts hlc.Timestamp, value []byte, lease uint64) error {
	newest, ok, fromBatch, err := w.newest(key)
	if err != nil {
		return err
	}
	if err := check(key, ts, newest, ok, fromBatch); err != nil {
		return err
	}
	// A live key keeps its creation; a new or deleted one is created now.
	// (Within one batch at one timestamp the last write replaces the
	// earlier ones, so a put after a delete there is a creation.)
	created := ts
	if ok && newest.live {
		created = newest.created
	}
	w.scratch = w.ks.engineKey(w.scratch[:0], key, ts)
	w.stored = appendLiveValue(w.stored[:0], created, lease, value)
	w.b.Put(w.scratch, w.stored)
	size := int64(len(w.scratch) + len(w.stored))
	w.account(newest, ok, fromBatch && newest.ts == ts, true, size)
	pv := pendingVersion{ts: ts, live: true, created: created, lease: lease, bytes: size, value: value}
	w.noteChange(key, &pv, newest, ok && fromBatch && newest.ts == ts)
	w.pending[string(key)] = pv
	return nil
}

// DeleteIfLeased deletes key at version ts if its newest version is a
// live value attached to lease, and says whether it did. A newer value
// written without the lease, or with another, stays: the end of a lease
// never deletes a write that came after the leased one. Errors as Put's.
func (w *Writer) DeleteIfLeased(key []byte, ts hlc.Timestamp, lease uint64) (bool, error) {
	newest, ok, _, err := w.newest(key)
	if err != nil {
		return false, err
	}
	if !ok || !newest.live || newest.lease != lease || lease == 0 {
		return false, nil
	}
	return w.Delete(key, ts)
}

// Delete writes a deletion of key at version ts, if key has a live value;
// deleted says whether it had. Errors as Put's.
func (w *Writer) Delete(key []byte, ts hlc.Timestamp) (deleted bool, err error) {
	newest, ok, fromBatch, err := w.newest(key)
	if err != nil {
		return false, err
	}
	if err := check(key, ts, newest, ok, fromBatch); err != nil {
		return false, err
	}
	if !ok || !newest.live {
		return false, nil
	}
	w.scratch = w.ks.engineKey(w.scratch[:0], key, ts)
	w.stored = appendTombstone(w.stored[:0])
	w.b.Put(w.scratch, w.stored)
	size := int64(len(w.scratch) + 1)
	w.account(newest, ok, fromBatch && newest.ts == ts, false, size)
	pv := pendingVersion{ts: ts, live: false, bytes: size}
	w.noteChange(key, &pv, newest, fromBatch && newest.ts == ts)
	w.pending[string(key)] = pv
	return true, nil
}

// noteChange fills pv's previous value (the value below its version: the
// one newest had, or newest's own when pv replaces it) and reports pv to
// OnChange.
func (w *Writer) noteChange(key []byte, pv *pendingVersion, newest pendingVersion, replace bool) {
	if replace {
		pv.prevLive, pv.prevValue = newest.prevLive, newest.prevValue
	} else {
		pv.prevLive, pv.prevValue = newest.live, newest.value
	}
	if w.OnChange == nil {
		return
	}
	c := Change{Key: bytes.Clone(key), Version: pv.ts, Deleted: !pv.live, PrevFound: pv.prevLive}
	if pv.live {
		c.Value = bytes.Clone(pv.value)
	}
	if pv.prevLive {
		c.PrevValue = bytes.Clone(pv.prevValue)
	}
	w.OnChange(c)
}

// DeleteRange deletes at version ts every user key in [start, end) that has
// a live value (nil start or end: the keyspace's beginning or end) and
// returns how many it deleted. Each deletion is a tombstone version, so
// the cost grows with the number of live keys in the span. If any of them
// has a version at or above ts, it returns a *WriteTooOldError; the batch
// then holds some of the deletions and must be discarded.
func (w *Writer) DeleteRange(start, end []byte, ts hlc.Timestamp) (int, error) {
	live, _, err := w.ks.Scan(w.r, start, end, hlc.MaxTimestamp, ScanOptions{})
	if err != nil {
		return 0, err
	}
	keys := make([][]byte, 0, len(live))
	for _, kv := range live {
		keys = append(keys, kv.Key)
	}
	// Keys this writer put that the reader does not have yet.
	for k := range w.pending {
		kb := []byte(k)
		if (start == nil || bytes.Compare(kb, start) >= 0) && (end == nil || bytes.Compare(kb, end) < 0) {
			keys = append(keys, kb)
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	n := 0
	for _, k := range keys {
		deleted, err := w.Delete(k, ts)
		if err != nil {
			return n, err
		}
		if deleted {
			n++
		}
	}
	return n, nil
}
