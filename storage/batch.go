package storage

import (
	"encoding/binary"
	"math"
	"strconv"
)

// The WriteBatch representation (engine.h; docs/formats.md). Go builds it
// byte for byte, so adding a record never crosses into C; DB.Write hands the
// whole buffer to the engine in one call.
//
//	batch     := header record*
//	header    := sequence: fixed64  (zero when built here; the engine assigns)
//	             count:    fixed32  (number of records)
//	record    := 0x00 varstring            -- Delete(key)
//	           | 0x01 varstring varstring  -- Put(key, value)
//	           | 0x02 varstring varstring  -- DeleteRange(start, end), end exclusive
//	varstring := len: varint32, bytes[len]
//
// Fixed-width integers are little-endian; varint32 is the LEB128 encoding
// of encoding/binary.PutUvarint, at most 5 bytes. Records apply atomically
// and in order: a later record wins.
//
// Format version 1. These bytes are what the engine's WAL stores, and a WAL
// written by one version is replayed by the next (after a crash, or an
// upgrade): the tags and the layout are frozen. DO NOT CHANGE THEM; a new
// kind of record gets a new tag. (Raft entries carry commands, not batches:
// command/ has their encoding.)
const (
	batchHeaderSize = 12

	// RecordDelete, RecordPut and RecordDeleteRange are the record tags.
	// DO NOT CHANGE: they are embedded in stored batches.
	RecordDelete      RecordKind = 0x00
	RecordPut         RecordKind = 0x01
	RecordDeleteRange RecordKind = 0x02
)

// RecordKind is the tag of one batch record.
type RecordKind uint8

func (k RecordKind) String() string {
	switch k {
	case RecordDelete:
		return "Delete"
	case RecordPut:
		return "Put"
	case RecordDeleteRange:
		return "DeleteRange"
	}
	return "RecordKind(" + strconv.Itoa(int(k)) + ")"
}

// Batch collects writes to apply atomically with DB.Write. It is plain Go:
// adding records allocates at most and never calls the engine. The zero
// Batch is empty and ready to use.
//
// A Batch is not safe for concurrent use. Keys and values are copied into
// the batch, so callers may reuse their buffers at once.
//
// A key, value or count too large for the format (4 GiB, 2^32-1 records)
// is not added; the batch remembers the first such error, Err returns it
// and DB.Write refuses the batch with it.
type Batch struct {
	repr  []byte // header + records; nil until the first record
	count uint32
	err   error
}

// NewBatch returns an empty batch whose buffer has room for sizeHint bytes.
func NewBatch(sizeHint int) *Batch {
	b := &Batch{}
	b.repr = make([]byte, batchHeaderSize, batchHeaderSize+max(sizeHint, 0))
	return b
}

// Put adds a record that sets key to value.
func (b *Batch) Put(key, value []byte) { b.add2(RecordPut, key, value) }

// Delete adds a record that deletes key. Deleting a missing key is not an
// error.
func (b *Batch) Delete(key []byte) { b.add1(RecordDelete, key) }

// DeleteRange adds a record that deletes every key in [start, end). An
// empty span (start >= end) deletes nothing.
func (b *Batch) DeleteRange(start, end []byte) { b.add2(RecordDeleteRange, start, end) }

// Count returns the number of records in the batch.
func (b *Batch) Count() uint32 { return b.count }

// Len returns the size of the batch's representation in bytes.
func (b *Batch) Len() int {
	if b.repr == nil {
		return batchHeaderSize
	}
	return len(b.repr)
}

// Empty reports whether the batch holds no records.
func (b *Batch) Empty() bool { return b.count == 0 }

// Err returns the first error met while adding records, or nil.
func (b *Batch) Err() error { return b.err }

// Reset empties the batch, keeping its buffer for reuse.
func (b *Batch) Reset() {
	if b.repr != nil {
		b.repr = b.repr[:batchHeaderSize]
		clear(b.repr)
	}
	b.count = 0
	b.err = nil
}

// Release empties the batch and frees its buffer, for a batch kept for
// reuse that is going to stay unused for long (the apply batch of a range
// at rest): the next record allocates a small buffer again.
func (b *Batch) Release() {
	b.repr = nil
	b.count = 0
	b.err = nil
}

// Repr returns the batch's encoded representation (grammar above). The
// slice aliases the batch's buffer: it is valid until the batch is next
// modified, and the caller must not change it.
func (b *Batch) Repr() []byte {
	b.init()
	return b.repr
}

// SetRepr replaces the batch's contents with a copy of repr, an encoded
// batch (for example one read back from a Raft log). It returns an error
// matching ErrCorruption, and leaves the batch unchanged, if repr does not
// parse or its count does not match its records.
func (b *Batch) SetRepr(repr []byte) error {
	r, err := NewBatchReader(repr)
	if err != nil {
		return err
	}
	for {
		if _, _, _, ok := r.Next(); !ok {
			break
		}
	}
	if err := r.Err(); err != nil {
		return err
	}
	b.repr = append(b.repr[:0], repr...)
	binary.LittleEndian.PutUint64(b.repr, 0)
	b.count = r.Count()
	b.err = nil
	return nil
}

// Append adds every record of other to b, after b's own, by copying
// their encoded bytes (no record is decoded or re-encoded): writing b then
// applies b's records and other's in order, atomically. other is not
// changed. An error of other's becomes b's, as does a count over the
// format's limit.
func (b *Batch) Append(other *Batch) {
	if b.err != nil {
		return
	}
	if other.err != nil {
		b.err = other.err
		return
	}
	if other.count == 0 {
		return
	}
	if uint64(b.count)+uint64(other.count) > math.MaxUint32 {
		b.err = errorf(ErrInvalidArgument, "batch: more than %d records", uint32(math.MaxUint32))
		return
	}
	b.init()
	b.repr = append(b.repr, other.repr[batchHeaderSize:]...)
	b.count += other.count
	binary.LittleEndian.PutUint32(b.repr[8:], b.count)
}

// Reader returns a reader over the batch's records.
func (b *Batch) Reader() *BatchReader {
	r, err := NewBatchReader(b.Repr())
	if err != nil {
		// A batch built by this type always has a valid header.
		panic("storage: batch with an invalid header: " + err.Error())
	}
	return r
}

func (b *Batch) init() {
	if b.repr == nil {
		b.repr = make([]byte, batchHeaderSize, 256)
	}
}

func (b *Batch) add1(kind RecordKind, key []byte) {
	if !b.canAdd(kind, len(key), 0) {
		return
	}
	b.repr = append(b.repr, byte(kind))
	b.repr = appendVarstring(b.repr, key)
	b.bumpCount()
}

func (b *Batch) add2(kind RecordKind, key, value []byte) {
	if !b.canAdd(kind, len(key), len(value)) {
		return
	}
	b.repr = append(b.repr, byte(kind))
	b.repr = appendVarstring(b.repr, key)
	b.repr = appendVarstring(b.repr, value)
	b.bumpCount()
}

func (b *Batch) canAdd(kind RecordKind, keyLen, valueLen int) bool {
	if b.err != nil {
		return false
	}
	b.init()
	switch {
	case uint64(keyLen) > math.MaxUint32 || uint64(valueLen) > math.MaxUint32:
		b.err = errorf(ErrInvalidArgument, "batch: %s record of %d+%d bytes: a key or value is over the format's 4 GiB limit",
			kind, keyLen, valueLen)
		return false
	case b.count == math.MaxUint32:
		b.err = errorf(ErrInvalidArgument, "batch: more than %d records", uint32(math.MaxUint32))
		return false
	}
	return true
}

func (b *Batch) bumpCount() {
	b.count++
	binary.LittleEndian.PutUint32(b.repr[8:], b.count)
}

func appendVarstring(dst, s []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// BatchReader decodes the records of an encoded batch, for tools, tests and
// Raft log replay. It never modifies the batch it reads, and the keys and
// values it returns alias it.
type BatchReader struct {
	data      []byte // records not yet read
	seq       uint64
	count     uint32
	remaining uint32
	err       error
}

// NewBatchReader returns a reader over repr. It fails with an error matching
// ErrCorruption when repr is shorter than a batch header.
func NewBatchReader(repr []byte) (*BatchReader, error) {
	if len(repr) < batchHeaderSize {
		return nil, errorf(ErrCorruption, "batch: %d bytes is shorter than the %d-byte header", len(repr), batchHeaderSize)
	}
	count := binary.LittleEndian.Uint32(repr[8:])
	return &BatchReader{
		data:      repr[batchHeaderSize:],
		seq:       binary.LittleEndian.Uint64(repr),
		count:     count,
		remaining: count,
	}, nil
}

// Sequence returns the sequence number in the header (zero for batches
// built in Go; the engine assigns sequence numbers when it applies them).
func (r *BatchReader) Sequence() uint64 { return r.seq }

// Count returns the record count in the header.
func (r *BatchReader) Count() uint32 { return r.count }

// Next decodes the next record. value is nil for Delete; for DeleteRange key
// and value are the span's start and end. ok is false at the end of the
// batch or on a malformed record; Err tells the two apart.
func (r *BatchReader) Next() (kind RecordKind, key, value []byte, ok bool) {
	if r.err != nil {
		return 0, nil, nil, false
	}
	if r.remaining == 0 {
		if len(r.data) != 0 {
			r.fail("%d bytes after the last of %d records", len(r.data), r.count)
		}
		return 0, nil, nil, false
	}
	if len(r.data) == 0 {
		r.fail("header says %d records, found %d", r.count, r.count-r.remaining)
		return 0, nil, nil, false
	}
	kind = RecordKind(r.data[0])
	r.data = r.data[1:]
	switch kind {
	case RecordDelete:
		if key, ok = r.varstring(); !ok {
			return 0, nil, nil, false
		}
	case RecordPut, RecordDeleteRange:
		if key, ok = r.varstring(); !ok {
			return 0, nil, nil, false
		}
		if value, ok = r.varstring(); !ok {
			return 0, nil, nil, false
		}
	default:
		r.fail("record %d has unknown tag %#x", r.count-r.remaining, byte(kind))
		return 0, nil, nil, false
	}
	r.remaining--
	return kind, key, value, true
}

// Err returns the error that stopped Next, or nil if the batch was read to
// its end cleanly. It matches ErrCorruption.
func (r *BatchReader) Err() error { return r.err }

func (r *BatchReader) varstring() ([]byte, bool) {
	n, w := binary.Uvarint(r.data)
	if w <= 0 || w > binary.MaxVarintLen32 || n > math.MaxUint32 {
		r.fail("record %d: bad length varint", r.count-r.remaining)
		return nil, false
	}
	if uint64(len(r.data)-w) < n {
		r.fail("record %d: length %d runs past the end of the batch", r.count-r.remaining, n)
		return nil, false
	}
	s := r.data[w : w+int(n) : w+int(n)]
	r.data = r.data[w+int(n):]
	return s, true
}

func (r *BatchReader) fail(format string, args ...any) {
	r.err = errorf(ErrCorruption, "batch: "+format, args...)
}
