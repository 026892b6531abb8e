package rangesm

import (
	"bytes"
	"fmt"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// The read path: user keys as the state machine lays them out in the
// engine. The caller decides when a read may be served (replication's read
// barrier: ReadIndex, the lease, or a stale read) and which range serves
// it; Reader reads the applied state. Reads here see every write applied
// before they start (each is one engine call or one iterator: a consistent
// view).

// Reader reads applied user data from the engine of one node, at a
// timestamp: each read sees, of every key, its newest version at or below
// the timestamp (keys.UserKeyspace, package mvcc). The caller picks a
// timestamp the serving range's MVCC state allows (at or below its
// frontier, at or above its GC threshold; Range.MVCCState), so what it
// reads never changes.
//
// A Reader serving clients must know the serving range's lock table
// (WithLocks): a read at ts that meets an intent at or below ts fails
// with an *IntentError (intent.go). NewReader's Reader reads versions
// only.
type Reader struct {
	db    *storage.DB
	locks Locks
	// committed are transactions the reader's client says committed, at
	// their commit timestamps (WithCommitted).
	committed map[command.TxnID]hlc.Timestamp
}

// WithCommitted returns r reading the intents of the transactions in
// committed as what they are: committed at the timestamp given (an
// intent's value visible at or above it, as a version there), instead of
// failing on them with an *IntentError. It is the coordinator's word for
// its own transactions, committed but perhaps not yet resolved
// (docs/transactions.md, "Resolution folded into writes"); an intent
// whose p is above the timestamp given is met as usual. Get and MultiGet
// honour it; Scan meets such intents as any other.
func (r Reader) WithCommitted(committed map[command.TxnID]hlc.Timestamp) Reader {
	r.committed = committed
	return r
}

// passCommitted splits met into the intents of transactions r knows
// committed (at a timestamp at or above their p) and the rest.
func (r Reader) passCommitted(met []Intent) (known, rest []Intent) {
	if len(r.committed) == 0 || len(met) >= maxIntentsReported {
		// (met may have been cut short: every intent must be seen.)
		return nil, met
	}
	for _, in := range met {
		if c, ok := r.committed[in.Txn]; ok && in.Provisional.LessEq(c) {
			known = append(known, in)
		} else {
			rest = append(rest, in)
		}
	}
	return known, rest
}

// overCommitted answers, from the versions read below them, the keys
// holding intents of transactions known committed: the intent's value as
// a version at the commit timestamp when that is at or below ts (nothing
// can be newer: the intent keeps every other write of its key out), the
// versions below it otherwise.
func (r Reader) overCommitted(known []Intent, ks [][]byte, kvs []mvcc.KeyValue, found []bool, ts hlc.Timestamp) {
	for _, in := range known {
		c := r.committed[in.Txn]
		if ts.Less(c) {
			continue
		}
		for i, k := range ks {
			if !bytes.Equal(k, in.Key) {
				continue
			}
			if in.Delete {
				kvs[i], found[i] = mvcc.KeyValue{}, false
				continue
			}
			created := c
			if found[i] {
				created = kvs[i].Created
			}
			kvs[i] = mvcc.KeyValue{Key: kvs[i].Key, Value: in.Value, Version: c, Created: created}
			if kvs[i].Key == nil {
				kvs[i].Key = k
			}
			found[i] = true
		}
	}
}

// WithLocks returns r reading range l.RangeID's lock table first.
func (r Reader) WithLocks(l Locks) Reader {
	r.locks = l
	return r
}

// NewReader returns a Reader of db, the engine the node's state machines
// apply into. db must be opened with keys.WithUserVersions.
func NewReader(db *storage.DB) Reader { return Reader{db: db} }

// Get returns user key k as of ts; found is false when it has no live
// version at or below ts.
func (r Reader) Get(k []byte, ts hlc.Timestamp) (kv mvcc.KeyValue, found bool, err error) {
	// The lock table first, then the data (intent.go).
	if r.locks.Held {
		met, err := r.intentsMet(r.locks, [][]byte{k}, ts)
		if err != nil {
			return mvcc.KeyValue{}, false, err
		}
		known, rest := r.passCommitted(met)
		if len(rest) > 0 {
			return mvcc.KeyValue{}, false, &IntentError{RangeID: r.locks.RangeID, ReadTimestamp: ts, Intents: rest}
		}
		if len(known) > 0 {
			kv, found, err := keys.UserKeyspace.Get(r.db, k, ts)
			if err != nil {
				return kv, found, err
			}
			kvs, fs := []mvcc.KeyValue{kv}, []bool{found}
			r.overCommitted(known, [][]byte{k}, kvs, fs, ts)
			return kvs[0], fs[0], nil
		}
	}
	return keys.UserKeyspace.Get(r.db, k, ts)
}

// MultiGet returns the user keys ks as of ts, from one engine view:
// found[i] and kvs[i] are Get's answer for ks[i].
func (r Reader) MultiGet(ks [][]byte, ts hlc.Timestamp) (kvs []mvcc.KeyValue, found []bool, err error) {
	if r.locks.Held {
		met, err := r.intentsMet(r.locks, ks, ts)
		if err != nil {
			return nil, nil, err
		}
		known, rest := r.passCommitted(met)
		if len(rest) > 0 {
			return nil, nil, &IntentError{RangeID: r.locks.RangeID, ReadTimestamp: ts, Intents: rest}
		}
		if len(known) > 0 {
			kvs, found, err := keys.UserKeyspace.GetMany(r.db, ks, ts)
			if err == nil {
				r.overCommitted(known, ks, kvs, found, ts)
			}
			return kvs, found, err
		}
	}
	return keys.UserKeyspace.GetMany(r.db, ks, ts)
}

// ScanOptions says what one page of a scan holds.
type ScanOptions struct {
	// Start and End bound the scan, [Start, End) in user keys (nil End:
	// to the end of the keyspace).
	Start, End []byte
	// Timestamp is the read's: each key as of it.
	Timestamp hlc.Timestamp
	// Reverse scans from End down to Start.
	Reverse bool
	// KeysOnly returns keys without values.
	KeysOnly bool
	// Limit and MaxBytes bound the page (in entries and in key + value
	// bytes). A page always holds at least one entry when one exists, so
	// MaxBytes can be exceeded by one entry and a scan always makes
	// progress.
	Limit, MaxBytes int
}

// ScanPage is one page of a scan.
type ScanPage struct {
	// Kvs carry their version and create_version.
	Kvs []*kvpb.KeyValue
	// More is set when the page stopped at Limit or MaxBytes; ResumeKey
	// is then where to continue: the next key for a forward scan (the
	// next Start), the last returned key for a reverse scan (the next,
	// exclusive, End).
	More      bool
	ResumeKey []byte
}

// Scan reads one page of user keys as of o.Timestamp from one engine view.
// It fails with an *IntentError if an intent at or below o.Timestamp
// lies in the part of the span the page covers.
func (r Reader) Scan(o ScanOptions) (page ScanPage, err error) {
	var met []Intent
	if r.locks.Held {
		// The lock table first, then the data (intent.go).
		if met, err = r.intentsIn(r.locks, o.Start, o.End, o.Timestamp); err != nil {
			return ScanPage{}, err
		}
	}
	page, err = r.scan(o)
	if err != nil || len(met) == 0 {
		return page, err
	}
	// Only the intents in the part of the span the page covers matter:
	// the rest is read (and met) by the next page.
	covered := met[:0]
	for _, in := range met {
		inPage := !page.More ||
			(!o.Reverse && bytes.Compare(in.Key, page.ResumeKey) < 0) ||
			(o.Reverse && bytes.Compare(in.Key, page.ResumeKey) >= 0)
		if inPage && len(covered) < maxIntentsReported {
			covered = append(covered, in)
		}
	}
	if len(covered) > 0 {
		return ScanPage{}, &IntentError{RangeID: r.locks.RangeID, ReadTimestamp: o.Timestamp, Intents: covered}
	}
	return page, nil
}

// scan is Scan of the versions alone.
func (r Reader) scan(o ScanOptions) (page ScanPage, err error) {
	span := keys.UserSpan(o.Start, o.End)
	opts := &storage.IterOptions{LowerBound: span.Start, UpperBound: span.End}
	if !o.Reverse {
		// The engine yields each key's newest version at or below the
		// timestamp and steps over the rest.
		opts.VersionFloor = mvcc.VersionFloor(o.Timestamp)
	}
	it, err := r.db.NewIter(opts)
	if err != nil {
		return ScanPage{}, err
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	vi := versionIter{it: it, ts: o.Timestamp, reverse: o.Reverse}
	size := 0
	for {
		e, ok, err := vi.next()
		if err != nil {
			return ScanPage{}, err
		}
		if !ok {
			return page, nil
		}
		entry := len(e.Key) + len(e.Value)
		if len(page.Kvs) == o.Limit || (len(page.Kvs) > 0 && size+entry > o.MaxBytes) {
			page.More = true
			if o.Reverse {
				page.ResumeKey = page.Kvs[len(page.Kvs)-1].Key
			} else {
				page.ResumeKey = e.Key
			}
			return page, nil
		}
		kv := &kvpb.KeyValue{Key: e.Key, Version: TimestampProto(e.Version), CreateVersion: TimestampProto(e.Created)}
		if !o.KeysOnly {
			kv.Value = append([]byte{}, e.Value...)
		}
		page.Kvs = append(page.Kvs, kv)
		size += entry
	}
}

// versionIter yields the live versions a read at ts sees, one per key, in
// key order or its reverse. Forward, the iterator has a version floor and
// yields just those versions (tombstones too). In reverse, a key's
// versions come oldest first, and the newest at or below ts is the last
// of them at or below it: versionIter steps over the others without
// decoding them (their version suffixes are compared with the floor's as
// bytes, as the engine's forward floor does), keeping the raw entry of the
// latest candidate in buffers it reuses, and decodes one entry per key.
type versionIter struct {
	it      *storage.Iterator
	ts      hlc.Timestamp
	reverse bool
	started bool
	valid   bool

	// Reverse only. floor is the version suffix of ts: a version is at or
	// below ts when its suffix is >= floor. enc is the encoded user key
	// (engine key without its suffix) being gathered (has: one is); cand
	// holds its newest version at or below ts so far (candKey, candVal:
	// the raw entry; hasCand: one was seen). hold: the iterator already
	// stands on the next entry to look at (the first of the next key).
	floor            []byte
	enc              []byte
	has              bool
	candKey, candVal []byte
	hasCand          bool
	hold             bool
}

func (v *versionIter) step() {
	switch {
	case v.hold:
		v.hold = false
	case !v.started && v.reverse:
		v.valid = v.it.Last()
	case !v.started:
		v.valid = v.it.First()
	case v.reverse:
		v.valid = v.it.Prev()
	default:
		v.valid = v.it.Next()
	}
	v.started = true
}

// next returns the next live version; the entry's slices are the caller's
// (Key) or valid until the next call (Value).
func (v *versionIter) next() (mvcc.Entry, bool, error) {
	if v.reverse {
		return v.nextReverse()
	}
	for {
		v.step()
		if !v.valid {
			return mvcc.Entry{}, false, v.it.Error()
		}
		e, err := keys.UserKeyspace.DecodeEntry(nil, v.it.UnsafeKey(), v.it.UnsafeValue())
		if err != nil {
			return mvcc.Entry{}, false, err
		}
		if e.Live && e.Version.LessEq(v.ts) {
			return e, true, nil
		}
	}
}

// nextReverse is next for a reverse scan.
func (v *versionIter) nextReverse() (mvcc.Entry, bool, error) {
	if v.floor == nil {
		v.floor = mvcc.VersionFloor(v.ts)
	}
	for {
		v.step()
		if !v.valid {
			if err := v.it.Error(); err != nil {
				return mvcc.Entry{}, false, err
			}
			if e, ok, err := v.finishKey(); err != nil || ok {
				return e, ok, err
			}
			return mvcc.Entry{}, false, nil
		}
		raw := v.it.UnsafeKey()
		n, err := mvcc.SplitKey(raw)
		if err != nil {
			return mvcc.Entry{}, false, fmt.Errorf("engine key %x: %w", raw, err)
		}
		if v.has && !bytes.Equal(raw[:n], v.enc) {
			// The key being gathered is complete: answer it, and look at
			// this entry again on the next call.
			v.hold = true
			e, ok, err := v.finishKey()
			if err != nil || ok {
				return e, ok, err
			}
			continue
		}
		if !v.has {
			v.enc, v.has, v.hasCand = append(v.enc[:0], raw[:n]...), true, false
		}
		if bytes.Compare(raw[n:], v.floor) >= 0 {
			// At or below ts, and newer than every candidate before it.
			v.candKey = append(v.candKey[:0], raw...)
			v.candVal = append(v.candVal[:0], v.it.UnsafeValue()...)
			v.hasCand = true
		}
	}
}

// finishKey ends the key being gathered: its newest version at or below
// ts, if there is one and it is live.
func (v *versionIter) finishKey() (mvcc.Entry, bool, error) {
	if !v.has {
		return mvcc.Entry{}, false, nil
	}
	v.has = false
	if !v.hasCand {
		return mvcc.Entry{}, false, nil
	}
	e, err := keys.UserKeyspace.DecodeEntry(nil, v.candKey, v.candVal)
	if err != nil {
		return mvcc.Entry{}, false, err
	}
	return e, e.Live, nil
}

// TimestampProto returns ts on the wire (nil for the zero timestamp).
func TimestampProto(ts hlc.Timestamp) *kvpb.Timestamp {
	if ts.IsZero() {
		return nil
	}
	return &kvpb.Timestamp{WallNanos: ts.WallTime, Logical: uint32(ts.Logical)}
}
