package storage

/*
#include <stdlib.h>
#include "shale/engine.h"

#cgo noescape shale_write
#cgo nocallback shale_write
#cgo noescape shale_get
#cgo nocallback shale_get
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// DB is an open engine database. It is safe for concurrent use by many
// goroutines without external synchronization.
//
// Close fails with ErrBusy while iterators or snapshots are open, so the
// engine handle never goes away under them; every other call made after
// Close fails with ErrClosed.
type DB struct {
	dir string

	// mu is held shared by every call into the engine through the handle
	// and exclusively by Close, so the handle is never freed under a
	// running call.
	mu struct {
		sync.RWMutex
		c      *C.shale_db_t // nil once closed
		closed bool
	}
	// Open iterators and snapshots. Incremented while holding mu shared,
	// decremented after the engine object is released; Close reads them
	// holding mu exclusively.
	openIters atomic.Int64
	openSnaps atomic.Int64

	getBufs sync.Pool // *[]byte scratch buffers for Get
	// multiGetAvgValue is a running estimate of value sizes (0: none yet),
	// used to size MultiGet's values buffer.
	multiGetAvgValue atomic.Int64
	// seekPrefixAvgEntry is the same for SeekPrefixGE's entries (key and
	// value bytes).
	seekPrefixAvgEntry atomic.Int64
}

// Open opens the database in directory dir, creating it unless
// opts.ErrorIfMissing is set, and replays its write-ahead log. A nil opts
// means the engine defaults.
func Open(dir string, opts *Options) (*DB, error) {
	if opts == nil {
		opts = &Options{}
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	var copts C.shale_options_t
	opts.toC(&copts)
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	var h *C.shale_db_t
	if err := statusToError("Open", C.shale_open(&copts, cdir, &h)); err != nil {
		return nil, err
	}
	db := &DB{dir: dir}
	db.mu.c = h
	db.getBufs.New = func() any {
		b := make([]byte, getBufInitial)
		return &b
	}
	return db, nil
}

// Destroy deletes the database files in dir. The database must not be open.
func Destroy(dir string) error {
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	return statusToError("Destroy", C.shale_destroy(cdir))
}

// Dir returns the directory the database was opened in.
func (db *DB) Dir() string { return db.dir }

// Close waits for background work to stop and releases the database. It
// fails with ErrBusy, leaving the database open, while iterators or
// snapshots are open; closing twice fails with ErrClosed.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.closed {
		return errorf(ErrClosed, "Close: database %s is already closed", db.dir)
	}
	if n, m := db.openIters.Load(), db.openSnaps.Load(); n > 0 || m > 0 {
		return errorf(ErrBusy, "Close: %d iterators and %d snapshots are still open; close them first", n, m)
	}
	st := C.shale_close(db.mu.c)
	db.mu.c = nil
	db.mu.closed = true
	return statusToError("Close", st)
}

// handle returns the engine handle with mu held shared; the caller must call
// db.mu.RUnlock when its engine call returns. It fails with ErrClosed after
// Close.
func (db *DB) handle(op string) (*C.shale_db_t, error) {
	db.mu.RLock()
	if db.mu.closed {
		db.mu.RUnlock()
		return nil, errorf(ErrClosed, "%s: database %s is closed", op, db.dir)
	}
	return db.mu.c, nil
}

// Write applies the batch atomically, in one call into the engine. An empty
// batch is allowed. A batch whose building failed (Batch.Err) is refused
// with that error.
func (db *DB) Write(b *Batch, wo WriteOptions) error {
	if b.err != nil {
		return b.err
	}
	repr := b.Repr()
	cwo := wo.toC()
	h, err := db.handle("Write")
	if err != nil {
		return err
	}
	st := C.shale_write(h, &cwo, cBytes(repr), C.size_t(len(repr)))
	db.mu.RUnlock()
	return statusToError("Write", st)
}

// Put sets key to value: a one-record batch.
func (db *DB) Put(key, value []byte, wo WriteOptions) error {
	var b Batch
	b.Put(key, value)
	return db.Write(&b, wo)
}

// Delete deletes key: a one-record batch.
func (db *DB) Delete(key []byte, wo WriteOptions) error {
	var b Batch
	b.Delete(key)
	return db.Write(&b, wo)
}

// Get buffers: a value is first read into a pooled scratch buffer and then
// copied to an exactly-sized slice, so one engine call suffices whenever the
// value fits. Buffers grow to the largest value seen up to getBufMax.
const (
	getBufInitial = 4 << 10
	getBufMax     = 256 << 10
)

// Get returns a copy of key's value. A missing key is an error matching
// ErrNotFound. A found value is never nil (an empty value is []byte{}).
func (db *DB) Get(key []byte) ([]byte, error) {
	return db.get(nil, key)
}

// AppendGet appends key's value to dst and returns the extended slice,
// reading straight into dst's spare capacity: with enough capacity it
// allocates nothing. A missing key is an error matching ErrNotFound and
// leaves dst unchanged.
func (db *DB) AppendGet(dst, key []byte) ([]byte, error) {
	return db.appendGet(nil, dst, key)
}

func (db *DB) get(snap *C.shale_snapshot_t, key []byte) ([]byte, error) {
	bufp := db.getBufs.Get().(*[]byte)
	buf := *bufp
	n, err := db.getInto(snap, key, buf)
	if err == errBufferTooSmall && n <= getBufMax {
		// Grow the pooled buffer for the next caller and read again.
		buf = make([]byte, n)
		*bufp = buf
		n, err = db.getInto(snap, key, buf)
	}
	if err == nil {
		v := make([]byte, n)
		copy(v, buf[:n])
		db.getBufs.Put(bufp)
		return v, nil
	}
	db.getBufs.Put(bufp)
	if err != errBufferTooSmall {
		return nil, err
	}
	// A large value: read it straight into its own slice, retrying if it
	// grew between the calls.
	return db.appendGet(snap, nil, key)
}

func (db *DB) appendGet(snap *C.shale_snapshot_t, dst, key []byte) ([]byte, error) {
	for {
		n, err := db.getInto(snap, key, dst[len(dst):cap(dst)])
		if err == nil {
			if n == 0 && dst == nil {
				return []byte{}, nil
			}
			return dst[:len(dst)+n], nil
		}
		if err != errBufferTooSmall {
			return dst, err
		}
		grown := make([]byte, len(dst), len(dst)+n)
		copy(grown, dst)
		dst = grown
	}
}

// errBufferTooSmall is getInto's signal that the value needs n bytes.
var errBufferTooSmall = &EngineError{Op: "Get", Code: codeBufferTooSmall}

// getInto reads key's value into buf and returns its length. If buf is too
// small it returns errBufferTooSmall and the length needed.
func (db *DB) getInto(snap *C.shale_snapshot_t, key, buf []byte) (int, error) {
	ro := readOptions(snap)
	var n C.size_t
	h, err := db.handle("Get")
	if err != nil {
		return 0, err
	}
	st := C.shale_get(h, &ro, cBytesNonNil(key), C.size_t(len(key)), cBytes(buf), C.size_t(len(buf)), &n)
	db.mu.RUnlock()
	if st.code == codeBufferTooSmall {
		freeStatus(st)
		return int(n), errBufferTooSmall
	}
	if err := statusToError("Get", st); err != nil {
		return 0, err
	}
	return int(n), nil
}

// defaultReadOptions are the engine's read defaults, read once.
var defaultReadOptions = func() C.shale_read_options_t {
	var ro C.shale_read_options_t
	C.shale_read_options_init(&ro)
	return ro
}()

func readOptions(snap *C.shale_snapshot_t) C.shale_read_options_t {
	ro := defaultReadOptions
	ro.snapshot = snap
	return ro
}

// Resume clears a background error (ErrNoSpace, ErrBackgroundError) once
// its cause is gone, letting writes and background work continue.
func (db *DB) Resume() error {
	h, err := db.handle("Resume")
	if err != nil {
		return err
	}
	st := C.shale_resume(h)
	db.mu.RUnlock()
	return statusToError("Resume", st)
}

// Flush writes the memtable to an L0 file and waits until it is durable.
func (db *DB) Flush() error {
	h, err := db.handle("Flush")
	if err != nil {
		return err
	}
	st := C.shale_flush(h, 1)
	db.mu.RUnlock()
	return statusToError("Flush", st)
}

// CompactRange compacts every level over [start, end) down to the bottom
// level and waits for it. A nil start or end is unbounded.
func (db *DB) CompactRange(start, end []byte) error {
	h, err := db.handle("CompactRange")
	if err != nil {
		return err
	}
	st := C.shale_compact_range(h, cBytesOrNil(start), C.size_t(len(start)), cBytesOrNil(end), C.size_t(len(end)))
	db.mu.RUnlock()
	return statusToError("CompactRange", st)
}

// WaitForCompaction blocks until no flush or compaction is pending or
// running.
func (db *DB) WaitForCompaction() error {
	h, err := db.handle("WaitForCompaction")
	if err != nil {
		return err
	}
	st := C.shale_wait_for_compaction(h)
	db.mu.RUnlock()
	return statusToError("WaitForCompaction", st)
}

// cBytesOrNil passes a nil slice as NULL (unbounded) and any other slice,
// even an empty one, as a valid pointer.
func cBytesOrNil(b []byte) *C.uint8_t {
	if b == nil {
		return nil
	}
	return cBytesNonNil(b)
}
