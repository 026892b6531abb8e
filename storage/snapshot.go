package storage

// #include "shale/engine.h"
import "C"

import (
	"sync"
	"sync/atomic"
)

// Snapshot is a consistent, read-only view of the database as of the moment
// it was taken: reads through it see exactly the writes made before. It pins
// old data, so release it with Close when done; DB.Close fails while
// snapshots are open. A Snapshot is safe for concurrent use.
type Snapshot struct {
	db     *DB
	c      *C.shale_snapshot_t
	closed atomic.Bool // set under mu; read without it by Get and MultiGet

	mu struct {
		sync.Mutex
		iters int // open iterators reading this snapshot
	}
}

// NewSnapshot takes a snapshot of the current state.
func (db *DB) NewSnapshot() (*Snapshot, error) {
	h, err := db.handle("NewSnapshot")
	if err != nil {
		return nil, err
	}
	c := C.shale_snapshot_new(h)
	if c != nil {
		db.openSnaps.Add(1)
	}
	db.mu.RUnlock()
	if c == nil {
		return nil, errorf(ErrClosed, "NewSnapshot: the engine refused (database closing)")
	}
	return &Snapshot{db: db, c: (*C.shale_snapshot_t)(c)}, nil
}

// Sequence returns the sequence number the snapshot reads at.
func (s *Snapshot) Sequence() uint64 {
	return uint64(C.shale_snapshot_sequence(s.c))
}

// Get returns a copy of key's value as of the snapshot (see DB.Get).
func (s *Snapshot) Get(key []byte) ([]byte, error) {
	if s.closed.Load() {
		return nil, errorf(ErrClosed, "Snapshot.Get: snapshot is closed")
	}
	return s.db.get(s.c, key)
}

// AppendGet appends key's value as of the snapshot to dst (see
// DB.AppendGet).
func (s *Snapshot) AppendGet(dst, key []byte) ([]byte, error) {
	if s.closed.Load() {
		return dst, errorf(ErrClosed, "Snapshot.AppendGet: snapshot is closed")
	}
	return s.db.appendGet(s.c, dst, key)
}

// MultiGet reads keys as of the snapshot (see DB.MultiGet).
func (s *Snapshot) MultiGet(keys [][]byte) ([][]byte, error) {
	if s.closed.Load() {
		return nil, errorf(ErrClosed, "Snapshot.MultiGet: snapshot is closed")
	}
	return s.db.multiGet(s.c, keys)
}

// NewIter returns an iterator over the snapshot (see DB.NewIter).
func (s *Snapshot) NewIter(opts *IterOptions) (*Iterator, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, errorf(ErrClosed, "Snapshot.NewIter: snapshot is closed")
	}
	it, err := s.db.newIter(s.c, opts)
	if err != nil {
		return nil, err
	}
	s.mu.iters++
	it.snap = s
	return it, nil
}

// iterClosed is called by Iterator.Close for iterators made by NewIter.
func (s *Snapshot) iterClosed() {
	s.mu.Lock()
	s.mu.iters--
	s.mu.Unlock()
}

// Close releases the snapshot. It fails with ErrBusy while iterators made
// from the snapshot are open, and with ErrClosed the second time.
//
// REQUIRES: no Get or MultiGet through s is running or will run.
func (s *Snapshot) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return errorf(ErrClosed, "Snapshot.Close: already closed")
	}
	if s.mu.iters > 0 {
		return errorf(ErrBusy, "Snapshot.Close: %d iterators still read this snapshot; close them first", s.mu.iters)
	}
	s.closed.Store(true)
	h, err := s.db.handle("Snapshot.Close")
	if err != nil {
		// DB.Close refuses while snapshots are open, so this cannot happen.
		return err
	}
	C.shale_snapshot_release(h, s.c)
	s.db.mu.RUnlock()
	s.db.openSnaps.Add(-1)
	return nil
}
