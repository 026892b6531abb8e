package storage

/*
#include "shale/engine.h"

#cgo noescape shale_iter_next_batch
#cgo nocallback shale_iter_next_batch
#cgo noescape shale_iter_seek
#cgo nocallback shale_iter_seek
#cgo noescape shale_iter_seek_for_prev
#cgo nocallback shale_iter_seek_for_prev
#cgo nocallback shale_iter_seek_to_first
#cgo nocallback shale_iter_seek_to_last
*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"sync"
)

// Iterator walks the entries of a DB or Snapshot in key order, in either
// direction, within optional bounds. It reads a consistent view: the state
// of the database (or snapshot) when it was created.
//
// The iterator does not cross into the engine per entry. Each refill copies
// a window of consecutive entries into a Go buffer in one call
// (shale_iter_next_batch); Next and Prev then walk that window and only call
// the engine again at its edge. Windows start small after every seek, so
// that short scans copy little, and double on each refill in the same
// direction.
//
// An Iterator is not safe for concurrent use. Close it when done: DB.Close
// and Snapshot.Close fail while iterators are open.
//
// Positioning methods (First, Last, SeekGE, SeekLT, Next, Prev) return
// whether the iterator is now at an entry. Next and Prev REQUIRE Valid().
// After an error Valid is false and Error returns it.
type Iterator struct {
	db       *DB
	snap     *Snapshot // non-nil for iterators made by Snapshot.NewIter
	c        *C.shale_iterator_t
	keysOnly bool
	// forwardOnly: the iterator has a version floor, which the engine
	// applies to forward batches only.
	forwardOnly bool

	// The window: entries copied out by the last refill, in the order the
	// engine produced them (ascending keys when dir > 0, descending when
	// dir < 0). Entry i starts at buf[offs[i]].
	buf  []byte
	offs []int32
	pos  int  // current entry; outside [0, len(offs)) when not valid
	dir  int8 // direction of the window; 0 when unpositioned
	// more: the engine has entries past the window's far end in dir; its
	// iterator is positioned at the first of them.
	more bool
	// limit is the entry count to ask for on the next refill.
	limit int
	// pendingErr is an error the engine reported after the window's
	// entries; it surfaces when the walk reaches the window's end.
	pendingErr error

	key, value []byte // the current entry, aliasing buf
	err        error
	scratch    []byte // seek-target scratch
	closed     bool
	// engineSeeks counts SeekGE calls that went to the engine (tests).
	engineSeeks int
}

const (
	iterFirstLimit = 16      // entries in the first window after a seek
	iterMaxLimit   = 1 << 16 // entries per window at most
	iterBufSize    = 64 << 10
	iterBufMaxPool = 1 << 20 // larger buffers are not kept in the pool
)

var iterBufs = sync.Pool{New: func() any {
	b := make([]byte, iterBufSize)
	return &b
}}

// NewIter returns an iterator over the current state of the database,
// restricted to opts' bounds (nil opts: everything). It starts unpositioned.
func (db *DB) NewIter(opts *IterOptions) (*Iterator, error) {
	return db.newIter(nil, opts)
}

func (db *DB) newIter(snap *C.shale_snapshot_t, opts *IterOptions) (*Iterator, error) {
	if opts == nil {
		opts = &IterOptions{}
	}
	ro := readOptions(snap)
	var c *C.shale_iterator_t
	h, err := db.handle("NewIter")
	if err != nil {
		return nil, err
	}
	st := C.shale_iter_new(h, &ro,
		cBytesOrNil(opts.LowerBound), C.size_t(len(opts.LowerBound)),
		cBytesOrNil(opts.UpperBound), C.size_t(len(opts.UpperBound)), &c)
	if st.code == codeOK {
		db.openIters.Add(1)
	}
	db.mu.RUnlock()
	if err := statusToError("NewIter", st); err != nil {
		return nil, err
	}
	if len(opts.VersionFloor) > 0 {
		st := C.shale_iter_set_version_floor(c, cBytes(opts.VersionFloor), C.size_t(len(opts.VersionFloor)))
		if err := statusToError("NewIter", st); err != nil {
			C.shale_iter_free(c)
			db.openIters.Add(-1)
			return nil, err
		}
	}
	bufp := iterBufs.Get().(*[]byte)
	return &Iterator{
		db:          db,
		c:           c,
		keysOnly:    opts.KeysOnly,
		forwardOnly: len(opts.VersionFloor) > 0,
		buf:         *bufp,
		offs:        make([]int32, 0, 64),
	}, nil
}

// Valid reports whether the iterator is at an entry.
func (it *Iterator) Valid() bool {
	return it.pos >= 0 && it.pos < len(it.offs) && it.err == nil
}

// Error returns the error that stopped the iteration, if any.
func (it *Iterator) Error() error { return it.err }

// UnsafeKey returns the current entry's key, aliasing the iterator's
// buffer: it is valid only until the next positioning call or Close, and
// must not be modified. REQUIRES: Valid().
func (it *Iterator) UnsafeKey() []byte { return it.key }

// UnsafeValue returns the current entry's value, aliasing the iterator's
// buffer like UnsafeKey (empty for KeysOnly iterators). REQUIRES: Valid().
func (it *Iterator) UnsafeValue() []byte { return it.value }

// Key returns a copy of the current entry's key. REQUIRES: Valid().
func (it *Iterator) Key() []byte { return bytes.Clone(it.key) }

// Value returns a copy of the current entry's value. REQUIRES: Valid().
func (it *Iterator) Value() []byte { return append([]byte{}, it.value...) }

// First moves to the first entry (the smallest key within the bounds).
func (it *Iterator) First() bool {
	if !it.usable() {
		return false
	}
	C.shale_iter_seek_to_first(it.c)
	return it.refill(+1, true)
}

// Last moves to the last entry (the largest key within the bounds).
func (it *Iterator) Last() bool {
	if !it.usable() {
		return false
	}
	if !it.backwardAllowed() {
		return false
	}
	C.shale_iter_seek_to_last(it.c)
	return it.refill(-1, true)
}

// SeekGE moves to the first entry whose key is >= key.
//
// A target inside the current ascending window (at or above its first
// key, at or below its last) is found there by binary search, without an
// engine call: the window holds consecutive entries, so the answer is in
// it. Scans that skip ahead by seeking a short way (an MVCC scan stepping
// past a key's older versions) then keep their windows and their growth.
func (it *Iterator) SeekGE(key []byte) bool {
	if !it.usable() {
		return false
	}
	if it.seekInWindow(key) {
		return true
	}
	it.engineSeeks++
	C.shale_iter_seek(it.c, cBytesNonNil(key), C.size_t(len(key)))
	return it.refill(+1, true)
}

// seekInWindow positions it at the first entry >= key if the current
// ascending window holds it, and reports whether it did.
func (it *Iterator) seekInWindow(key []byte) bool {
	if it.dir <= 0 || !it.Valid() {
		return false
	}
	n := len(it.offs)
	if bytes.Compare(key, it.keyAt(0)) < 0 || bytes.Compare(key, it.keyAt(n-1)) > 0 {
		return false
	}
	lo, hi := 0, n-1 // keyAt(hi) >= key
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if bytes.Compare(it.keyAt(mid), key) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	it.pos = lo
	return it.load()
}

// keyAt returns the key of window entry i, aliasing the window.
func (it *Iterator) keyAt(i int) []byte {
	off := int(it.offs[i])
	kl := int(binary.LittleEndian.Uint32(it.buf[off:]))
	return it.buf[off+8 : off+8+kl]
}

// SeekLT moves to the last entry whose key is < key.
func (it *Iterator) SeekLT(key []byte) bool {
	if !it.usable() {
		return false
	}
	if !it.backwardAllowed() {
		return false
	}
	// The engine seeks to the last key <= key; step over key itself.
	C.shale_iter_seek_for_prev(it.c, cBytesNonNil(key), C.size_t(len(key)))
	if !it.refill(-1, true) {
		return false
	}
	if bytes.Equal(it.key, key) {
		return it.advance()
	}
	return true
}

// SeekGT moves to the first entry whose key is > key.
func (it *Iterator) SeekGT(key []byte) bool {
	if !it.usable() {
		return false
	}
	// The smallest key greater than key is key+"\x00".
	it.scratch = append(append(it.scratch[:0], key...), 0)
	C.shale_iter_seek(it.c, cBytesNonNil(it.scratch), C.size_t(len(it.scratch)))
	return it.refill(+1, true)
}

// Next moves to the next entry in ascending key order. REQUIRES: Valid().
func (it *Iterator) Next() bool {
	if !it.Valid() {
		return false
	}
	if it.dir > 0 {
		return it.advance()
	}
	// A descending window: larger keys are behind us in the window.
	if it.pos > 0 {
		it.pos--
		return it.load()
	}
	// Re-seek past the current key, which is the largest in the window.
	it.scratch = append(append(it.scratch[:0], it.key...), 0)
	C.shale_iter_seek(it.c, cBytesNonNil(it.scratch), C.size_t(len(it.scratch)))
	return it.refill(+1, true)
}

// Prev moves to the previous entry in ascending key order (the next one
// in descending order). REQUIRES: Valid().
func (it *Iterator) Prev() bool {
	if !it.Valid() {
		return false
	}
	if !it.backwardAllowed() {
		return false
	}
	if it.dir < 0 {
		return it.advance()
	}
	if it.pos > 0 {
		it.pos--
		return it.load()
	}
	// The current key is the smallest in an ascending window: re-seek
	// before it. The scratch copy is needed because the refill overwrites
	// the buffer it.key points into.
	it.scratch = append(it.scratch[:0], it.key...)
	C.shale_iter_seek_for_prev(it.c, cBytesNonNil(it.scratch), C.size_t(len(it.scratch)))
	if !it.refill(-1, true) {
		return false
	}
	if bytes.Equal(it.key, it.scratch) {
		return it.advance()
	}
	return true
}

// advance moves one entry further in the window's direction, refilling
// from the engine at the window's end.
func (it *Iterator) advance() bool {
	it.pos++
	if it.pos < len(it.offs) {
		return it.load()
	}
	if it.pendingErr != nil {
		it.err, it.pendingErr = it.pendingErr, nil
		return false
	}
	if !it.more {
		return false
	}
	return it.refill(it.dir, false)
}

// refill copies the next window from the engine's current position in
// direction dir and moves to its first entry. afterSeek starts a new
// sequence of windows at the smallest size.
func (it *Iterator) refill(dir int8, afterSeek bool) bool {
	if afterSeek || it.limit == 0 {
		it.limit = iterFirstLimit
	} else {
		it.limit = min(2*it.limit, iterMaxLimit)
	}
	it.dir = dir
	it.offs = it.offs[:0]
	it.pos = 0
	it.more = false
	it.pendingErr = nil
	it.err = nil
	var flags C.uint32_t
	if dir < 0 {
		flags |= C.SHALE_ITER_REVERSE
	}
	if it.keysOnly {
		flags |= C.SHALE_ITER_KEYS_ONLY
	}
	for {
		var n, used C.size_t
		var valid C.uint8_t
		st := C.shale_iter_next_batch(it.c, flags, C.size_t(it.limit),
			cBytes(it.buf), C.size_t(len(it.buf)), &n, &used, &valid)
		if st.code == codeBufferTooSmall {
			// Even the first entry does not fit: grow to its size.
			freeStatus(st)
			it.buf = make([]byte, max(int(used), 2*len(it.buf)))
			continue
		}
		it.pendingErr = statusToError("Iterator", st)
		if err := it.index(int(n), int(used)); err != nil {
			it.err = err
			return false
		}
		it.more = valid != 0 && it.pendingErr == nil
		if n == 0 && it.more {
			it.err = errorf(ErrCorruption, "Iterator: the engine returned no entries but says more remain")
			return false
		}
		break
	}
	if len(it.offs) == 0 {
		it.err, it.pendingErr = it.pendingErr, nil
		return false
	}
	return it.load()
}

// index records the start of each of the n entries in buf[:used],
// checking that they fit exactly.
func (it *Iterator) index(n, used int) error {
	if used > len(it.buf) {
		return errorf(ErrCorruption, "Iterator: the engine reports %d bytes used of a %d-byte buffer", used, len(it.buf))
	}
	off := 0
	for i := 0; i < n; i++ {
		if used-off < 8 {
			return errorf(ErrCorruption, "Iterator: entry %d of %d: header past the %d bytes used", i, n, used)
		}
		kl := int(binary.LittleEndian.Uint32(it.buf[off:]))
		vl := int(binary.LittleEndian.Uint32(it.buf[off+4:]))
		if kl > used-off-8 || vl > used-off-8-kl {
			return errorf(ErrCorruption, "Iterator: entry %d of %d: %d+%d bytes past the %d bytes used", i, n, kl, vl, used)
		}
		it.offs = append(it.offs, int32(off))
		off += 8 + kl + vl
	}
	if off != used {
		return errorf(ErrCorruption, "Iterator: %d entries fill %d bytes, the engine says %d", n, off, used)
	}
	return nil
}

// load sets key and value from the entry at pos. REQUIRES: pos is in the
// window.
func (it *Iterator) load() bool {
	off := int(it.offs[it.pos])
	kl := int(binary.LittleEndian.Uint32(it.buf[off:]))
	vl := int(binary.LittleEndian.Uint32(it.buf[off+4:]))
	k := off + 8
	it.key = it.buf[k : k+kl : k+kl]
	it.value = it.buf[k+kl : k+kl+vl : k+kl+vl]
	return true
}

// backwardAllowed fails the iterator if it reads forward only.
func (it *Iterator) backwardAllowed() bool {
	if it.forwardOnly {
		it.err = errorf(ErrInvalidArgument, "Iterator: an iterator with a VersionFloor reads forward only")
		it.pos = -1
		return false
	}
	return true
}

func (it *Iterator) usable() bool {
	if it.closed {
		it.err = errorf(ErrClosed, "Iterator: closed")
		return false
	}
	return true
}

// Close releases the iterator and returns the error that stopped the
// iteration, if any. Closing twice is a no-op.
func (it *Iterator) Close() error {
	if it.closed {
		return nil
	}
	it.closed = true
	C.shale_iter_free(it.c)
	it.c = nil
	if cap(it.buf) <= iterBufMaxPool {
		b := it.buf[:cap(it.buf)]
		iterBufs.Put(&b)
	}
	it.buf, it.key, it.value, it.offs = nil, nil, nil, nil
	it.pos = -1
	it.db.openIters.Add(-1)
	if it.snap != nil {
		it.snap.iterClosed()
	}
	return it.err
}
