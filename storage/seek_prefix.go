package storage

/*
#include "shale/engine.h"

#cgo noescape shale_multi_seek_prefix
#cgo nocallback shale_multi_seek_prefix
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// SeekPrefixGE is the point read of versioned keys, on a database opened
// with SplitVersionSuffix. It returns the first live entry at or after
// target among the versions of target's key: the keys whose unversioned
// part (the key without its version suffix, which is what the Bloom
// filters hold) equals target's. With package mvcc's keys, target key@ts
// yields the key's newest version at or below ts. found is false when
// there is none.
//
// Unlike a seek of an iterator, it reads only the tables whose filter may
// hold the unversioned key, so a read of a key that no table holds costs
// filter probes and no data block. Keys with another unversioned part are
// passed over; with prefix-free unversioned parts (mvcc's) the first key
// past target's versions ends the read.
//
// A target that is not a versioned key (outside VersionedKeyPrefix, or
// without a valid suffix length byte) fails with ErrInvalidArgument; a
// database without SplitVersionSuffix fails with ErrNotSupported. The
// results are the caller's.
func (db *DB) SeekPrefixGE(target []byte) (key, value []byte, found bool, err error) {
	return db.seekPrefixOne(nil, target)
}

// MultiSeekPrefixGE is SeekPrefixGE for many targets in one call into the
// engine, all read at one consistent point: keys[i] and values[i] answer
// targets[i], keys[i] being nil when there is no such entry. Targets may
// come in any order and repeat. All results share freshly allocated
// buffers, each slice capped so that appending to one never overwrites
// another. One target that is not a versioned key, or a read error,
// fails the whole call.
func (db *DB) MultiSeekPrefixGE(targets [][]byte) (keys, values [][]byte, err error) {
	return db.multiSeekPrefix(nil, targets)
}

// SeekPrefixGE reads as of the snapshot (see DB.SeekPrefixGE).
func (s *Snapshot) SeekPrefixGE(target []byte) (key, value []byte, found bool, err error) {
	if s.closed.Load() {
		return nil, nil, false, errorf(ErrClosed, "Snapshot.SeekPrefixGE: snapshot is closed")
	}
	return s.db.seekPrefixOne(s.c, target)
}

// MultiSeekPrefixGE reads as of the snapshot (see DB.MultiSeekPrefixGE).
func (s *Snapshot) MultiSeekPrefixGE(targets [][]byte) (keys, values [][]byte, err error) {
	if s.closed.Load() {
		return nil, nil, errorf(ErrClosed, "Snapshot.MultiSeekPrefixGE: snapshot is closed")
	}
	return s.db.multiSeekPrefix(s.c, targets)
}

// seekPrefixOneStack is the size of the buffer on seekPrefixOne's stack
// that an entry of up to its size is read into.
const seekPrefixOneStack = 512

// seekPrefixOne is multiSeekPrefix of one target (a put's read of its
// key's newest version), with at most one allocation, the entry's, instead
// of a batch's seven: the target is passed in place and the offsets,
// lengths and status live on the stack (the call is noescape), and so does
// the buffer the engine copies an entry of usual size into: a read that
// finds nothing (a put of a new key) allocates nothing, one that finds an
// entry copies it out at its size.
func (db *DB) seekPrefixOne(snap *C.shale_snapshot_t, target []byte) (key, value []byte, found bool, err error) {
	const op = "SeekPrefixGE"
	var keyOffs [2]C.size_t
	var outOffs, keyLens, valLens [1]C.size_t
	var statuses [1]C.int32_t
	keyOffs[1] = C.size_t(len(target))

	h, err := db.handle(op)
	if err != nil {
		return nil, nil, false, err
	}
	defer db.mu.RUnlock()

	// As multiSeekPrefix: a retry under a snapshot when the entry does not
	// fit the buffer sized from experience.
	avg := int(db.seekPrefixAvgEntry.Load())
	if avg == 0 {
		avg = 128
	}
	capacity := max(avg*5/4, 256)
	ownSnap := false
	release := func() {
		if ownSnap {
			C.shale_snapshot_release(h, snap)
		}
	}
	defer release()
	var stack [seekPrefixOneStack]byte
	for attempt := 0; ; attempt++ {
		// out is the buffer the engine fills: the stack's, or heap, the
		// only one results are sliced from (so that stack stays on the
		// stack).
		var out, heap []byte
		if capacity <= len(stack) {
			out = stack[:]
		} else {
			heap = make([]byte, capacity)
			out = heap
		}
		ro := readOptions(snap)
		st := C.shale_multi_seek_prefix(h, &ro, 1, cBytesNonNil(target), &keyOffs[0],
			(*C.uint8_t)(unsafe.Pointer(&out[0])), C.size_t(len(out)),
			&outOffs[0], &keyLens[0], &valLens[0], &statuses[0])
		if err := statusToError(op, st); err != nil {
			return nil, nil, false, err
		}
		if statuses[0] == codeBufferTooSmall {
			if attempt >= 2 {
				return nil, nil, false, errorf(ErrCorruption, "%s: the entry still does not fit in %d bytes after %d attempts", op, capacity, attempt+1)
			}
			if snap == nil {
				snap = (*C.shale_snapshot_t)(C.shale_snapshot_new(h))
				if snap == nil {
					return nil, nil, false, errorf(ErrClosed, "%s: the engine refused a snapshot (database closing)", op)
				}
				ownSnap = true
			}
			needed := int(keyLens[0] + valLens[0])
			capacity = max(needed+needed/8, capacity)
			continue
		}
		off, kl, vl, ok, err := seekPrefixBounds(0, target, len(out), outOffs[0], keyLens[0], valLens[0], statuses[0])
		if err != nil || !ok {
			return nil, nil, false, err
		}
		db.noteSeekPrefixEntries(1, kl+vl)
		if heap == nil {
			// Out of the stack's buffer, in one allocation.
			heap = make([]byte, kl+vl)
			copy(heap, stack[off:off+kl+vl])
			off = 0
		}
		return heap[off : off+kl : off+kl], heap[off+kl : off+kl+vl : off+kl+vl], true, nil
	}
}

func (db *DB) multiSeekPrefix(snap *C.shale_snapshot_t, targets [][]byte) ([][]byte, [][]byte, error) {
	const op = "SeekPrefixGE"
	n := len(targets)
	if n == 0 {
		return [][]byte{}, [][]byte{}, nil
	}
	total := 0
	for _, t := range targets {
		total += len(t)
	}
	keyBuf := make([]byte, 0, max(total, 1))
	// Target offsets (n+1), then output offsets, key lengths, value
	// lengths (n each).
	sizes := make([]C.size_t, 4*n+1)
	keyOffs, outOffs := sizes[:n+1], sizes[n+1:2*n+1]
	keyLens, valLens := sizes[2*n+1:3*n+1], sizes[3*n+1:]
	for i, t := range targets {
		keyOffs[i] = C.size_t(len(keyBuf))
		keyBuf = append(keyBuf, t...)
	}
	keyOffs[n] = C.size_t(len(keyBuf))
	statuses := make([]C.int32_t, n)

	h, err := db.handle(op)
	if err != nil {
		return nil, nil, err
	}
	defer db.mu.RUnlock()

	// As in MultiGet: the first attempt reads the latest state into a
	// buffer sized from experience; if some entries do not fit, a retry
	// under a snapshot (the caller's or its own) sized from the reported
	// lengths reads the same entries, and always fits.
	avg := int(db.seekPrefixAvgEntry.Load())
	if avg == 0 {
		avg = 128
	}
	capacity := max(avg*n*5/4, 256)
	ownSnap := false
	release := func() {
		if ownSnap {
			C.shale_snapshot_release(h, snap)
		}
	}
	for attempt := 0; ; attempt++ {
		out := make([]byte, capacity)
		ro := readOptions(snap)
		st := C.shale_multi_seek_prefix(h, &ro, C.size_t(n), cBytesNonNil(keyBuf), &keyOffs[0],
			(*C.uint8_t)(unsafe.Pointer(&out[0])), C.size_t(len(out)),
			&outOffs[0], &keyLens[0], &valLens[0], &statuses[0])
		if err := statusToError(op, st); err != nil {
			release()
			return nil, nil, err
		}
		needed, tooSmall := 0, false
		for i := range statuses {
			switch statuses[i] {
			case codeOK:
				needed += int(keyLens[i] + valLens[i])
			case codeBufferTooSmall:
				needed += int(keyLens[i] + valLens[i])
				tooSmall = true
			}
		}
		if !tooSmall {
			release()
			return db.seekPrefixResults(targets, out, outOffs, keyLens, valLens, statuses)
		}
		if attempt >= 2 {
			release()
			return nil, nil, errorf(ErrCorruption, "%s: entries still do not fit in %d bytes after %d attempts", op, capacity, attempt+1)
		}
		if snap == nil {
			snap = (*C.shale_snapshot_t)(C.shale_snapshot_new(h))
			if snap == nil {
				return nil, nil, errorf(ErrClosed, "%s: the engine refused a snapshot (database closing)", op)
			}
			ownSnap = true
		}
		capacity = max(needed+needed/8, capacity)
	}
}

// seekPrefixResults slices each found entry's key and value out of out.
func (db *DB) seekPrefixResults(targets [][]byte, out []byte, outOffs, keyLens, valLens []C.size_t, statuses []C.int32_t) ([][]byte, [][]byte, error) {
	keys, values := make([][]byte, len(targets)), make([][]byte, len(targets))
	found, entryBytes := 0, 0
	for i := range statuses {
		k, v, err := seekPrefixEntry(i, targets[i], out, outOffs[i], keyLens[i], valLens[i], statuses[i])
		if err != nil {
			return nil, nil, err
		}
		if k != nil {
			keys[i], values[i] = k, v
			found++
			entryBytes += len(k) + len(v)
		}
	}
	db.noteSeekPrefixEntries(found, entryBytes)
	return keys, values, nil
}

// seekPrefixEntry slices the entry answering target i out of out: a nil
// key when the engine found none.
func seekPrefixEntry(i int, target, out []byte, outOff, keyLen, valLen C.size_t, status C.int32_t) (key, value []byte, err error) {
	off, kl, vl, ok, err := seekPrefixBounds(i, target, len(out), outOff, keyLen, valLen, status)
	if err != nil || !ok {
		return nil, nil, err
	}
	return out[off : off+kl : off+kl], out[off+kl : off+kl+vl : off+kl+vl], nil
}

// seekPrefixBounds checks the engine's answer to target i: ok with the
// entry's offset and its key's and value's lengths in an outLen-byte
// buffer, not ok when the engine found none.
func seekPrefixBounds(i int, target []byte, outLen int, outOff, keyLen, valLen C.size_t, status C.int32_t) (off, kl, vl int, ok bool, err error) {
	const op = "SeekPrefixGE"
	switch status {
	case codeOK:
		off, kl, vl = int(outOff), int(keyLen), int(valLen)
		if off < 0 || kl < 0 || vl < 0 || off+kl+vl > outLen {
			return 0, 0, 0, false, errorf(ErrCorruption, "%s: target %d: entry [%d, %d) outside the %d-byte buffer", op, i, off, off+kl+vl, outLen)
		}
		return off, kl, vl, true, nil
	case codeNotFound:
		return 0, 0, 0, false, nil
	case codeInvalidArgument:
		return 0, 0, 0, false, &EngineError{Op: op, Code: int(status),
			Msg: fmt.Sprintf("target %d (%q) is not a versioned key", i, truncateKey(target))}
	default:
		return 0, 0, 0, false, &EngineError{Op: op, Code: int(status),
			Msg: fmt.Sprintf("target %d (%q)", i, truncateKey(target))}
	}
}

// noteSeekPrefixEntries moves the running estimate of an entry's size a
// quarter of the way to the average of the found entries of one call.
func (db *DB) noteSeekPrefixEntries(found, entryBytes int) {
	if found == 0 {
		return
	}
	avg := int64(entryBytes / found)
	if old := db.seekPrefixAvgEntry.Load(); old != 0 {
		avg = old + (avg-old)/4
	}
	db.seekPrefixAvgEntry.Store(max(avg, 1))
}
