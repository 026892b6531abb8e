package rangesm

import (
	"errors"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// The read path: user keys as the state machine lays them out in the
// engine. The caller decides when a read may be served (replication's read
// barrier: ReadIndex, the lease, or a stale read) and which range serves
// it; Reader reads the applied state. Reads here see every write applied
// before they start (each is one engine call or one iterator: a consistent
// view).

// Reader reads applied user data from the engine of one node.
type Reader struct {
	db *storage.DB
}

// NewReader returns a Reader of db, the engine the node's state machines
// apply into.
func NewReader(db *storage.DB) Reader { return Reader{db: db} }

// Get returns the value of user key k; found is false when it has none.
func (r Reader) Get(k []byte) (value []byte, found bool, err error) {
	v, err := r.db.Get(keys.UserKey(k))
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return v, true, nil
}

// MultiGet returns the values of the user keys ks at one consistent point,
// nil for a key with none.
func (r Reader) MultiGet(ks [][]byte) ([][]byte, error) {
	eks := make([][]byte, len(ks))
	for i, k := range ks {
		eks[i] = keys.UserKey(k)
	}
	return r.db.MultiGet(eks)
}

// ScanOptions says what one page of a scan holds.
type ScanOptions struct {
	// Start and End bound the scan, [Start, End) in user keys (nil End:
	// to the end of the keyspace).
	Start, End []byte
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
	Kvs []*kvpb.KeyValue
	// More is set when the page stopped at Limit or MaxBytes; ResumeKey
	// is then where to continue: the next key for a forward scan (the
	// next Start), the last returned key for a reverse scan (the next,
	// exclusive, End).
	More      bool
	ResumeKey []byte
}

// Scan reads one page of user keys from a consistent engine view.
func (r Reader) Scan(o ScanOptions) (ScanPage, error) {
	span := keys.UserSpan(o.Start, o.End)
	it, err := r.db.NewIter(&storage.IterOptions{LowerBound: span.Start, UpperBound: span.End, KeysOnly: o.KeysOnly})
	if err != nil {
		return ScanPage{}, err
	}
	defer it.Close()
	var page ScanPage
	step := it.Next
	valid := false
	if o.Reverse {
		step = it.Prev
		valid = it.Last()
	} else {
		valid = it.First()
	}
	size := 0
	for ; valid; valid = step() {
		k, err := keys.DecodeUserKey(it.UnsafeKey())
		if err != nil {
			return ScanPage{}, err
		}
		entry := len(k) + len(it.UnsafeValue())
		if len(page.Kvs) == o.Limit || (len(page.Kvs) > 0 && size+entry > o.MaxBytes) {
			break
		}
		kv := &kvpb.KeyValue{Key: append([]byte{}, k...)}
		if !o.KeysOnly {
			kv.Value = it.Value()
		}
		page.Kvs = append(page.Kvs, kv)
		size += entry
	}
	if err := it.Error(); err != nil {
		return ScanPage{}, err
	}
	if valid {
		page.More = true
		if o.Reverse {
			page.ResumeKey = page.Kvs[len(page.Kvs)-1].Key
		} else {
			k, err := keys.DecodeUserKey(it.UnsafeKey())
			if err != nil {
				return ScanPage{}, err
			}
			page.ResumeKey = append([]byte{}, k...)
		}
	}
	return page, nil
}
