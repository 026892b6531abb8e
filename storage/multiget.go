package storage

/*
#include "shale/engine.h"

#cgo noescape shale_multi_get
#cgo nocallback shale_multi_get
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// MultiGet reads many keys at one consistent point in one call into the
// engine, which groups the lookups per file. values[i] answers keys[i]: nil
// when the key does not exist, otherwise its value (non-nil, possibly
// empty). All values share one freshly allocated buffer; each is capped so
// that appending to one never overwrites another.
//
// A failure to read any one key (corruption, I/O) fails the whole call.
func (db *DB) MultiGet(keys [][]byte) ([][]byte, error) {
	return db.multiGet(nil, keys)
}

func (db *DB) multiGet(snap *C.shale_snapshot_t, keys [][]byte) ([][]byte, error) {
	n := len(keys)
	if n == 0 {
		return [][]byte{}, nil
	}
	// Flatten the keys: keyBuf holds them back to back, key i being
	// keyBuf[offs[i]:offs[i+1]].
	total := 0
	for _, k := range keys {
		total += len(k)
	}
	keyBuf := make([]byte, 0, max(total, 1))
	sizes := make([]C.size_t, 3*n+1) // key offsets (n+1), value offsets, value lengths
	keyOffs, valOffs, valLens := sizes[:n+1], sizes[n+1:2*n+1], sizes[2*n+1:]
	for i, k := range keys {
		keyOffs[i] = C.size_t(len(keyBuf))
		keyBuf = append(keyBuf, k...)
	}
	keyOffs[n] = C.size_t(len(keyBuf))
	statuses := make([]C.int32_t, n)

	h, err := db.handle("MultiGet")
	if err != nil {
		return nil, err
	}
	defer db.mu.RUnlock()

	// The first attempt reads at the latest state with a buffer sized from
	// experience. If some values do not fit, its answers are thrown away:
	// a later read would be at a different point. The retry pins a
	// snapshot (unless the caller gave one) so that it and any further
	// retry see the same values, and sizes the buffer from the lengths the
	// engine reported; a second retry under the same snapshot always fits.
	avg := int(db.multiGetAvgValue.Load())
	if avg == 0 {
		avg = 128
	}
	capacity := max(avg*n*5/4, 256)
	ownSnap := false
	for attempt := 0; ; attempt++ {
		vals := make([]byte, capacity)
		ro := readOptions(snap)
		st := C.shale_multi_get(h, &ro, C.size_t(n), cBytesNonNil(keyBuf), &keyOffs[0],
			(*C.uint8_t)(unsafe.Pointer(&vals[0])), C.size_t(len(vals)),
			&valOffs[0], &valLens[0], &statuses[0])
		if err := statusToError("MultiGet", st); err != nil {
			if ownSnap {
				C.shale_snapshot_release(h, snap)
			}
			return nil, err
		}
		needed, tooSmall := 0, false
		for i := range statuses {
			switch statuses[i] {
			case codeOK:
				needed += int(valLens[i])
			case codeBufferTooSmall:
				needed += int(valLens[i])
				tooSmall = true
			}
		}
		if !tooSmall {
			if ownSnap {
				C.shale_snapshot_release(h, snap)
			}
			return db.multiGetResults(keys, vals, valOffs, valLens, statuses, needed)
		}
		if attempt >= 2 {
			// Under one snapshot the second attempt had room for every
			// value the first reported: the engine broke its contract.
			if ownSnap {
				C.shale_snapshot_release(h, snap)
			}
			return nil, errorf(ErrCorruption, "MultiGet: values still do not fit in %d bytes after %d attempts", capacity, attempt+1)
		}
		if snap == nil {
			snap = (*C.shale_snapshot_t)(C.shale_snapshot_new(h))
			if snap == nil {
				return nil, errorf(ErrClosed, "MultiGet: the engine refused a snapshot (database closing)")
			}
			ownSnap = true
		}
		capacity = max(needed+needed/8, capacity)
	}
}

// multiGetResults slices each found value out of vals.
func (db *DB) multiGetResults(keys [][]byte, vals []byte, valOffs, valLens []C.size_t, statuses []C.int32_t, needed int) ([][]byte, error) {
	out := make([][]byte, len(keys))
	found := 0
	for i := range statuses {
		switch statuses[i] {
		case codeOK:
			off, l := int(valOffs[i]), int(valLens[i])
			if off < 0 || l < 0 || off+l > len(vals) {
				return nil, errorf(ErrCorruption, "MultiGet: key %d: value [%d, %d) outside the %d-byte buffer", i, off, off+l, len(vals))
			}
			out[i] = vals[off : off+l : off+l]
			found++
		case codeNotFound:
		default:
			return nil, &EngineError{Op: "MultiGet", Code: int(statuses[i]),
				Msg: fmt.Sprintf("key %d (%q)", i, truncateKey(keys[i]))}
		}
	}
	if found > 0 {
		// Move the running estimate a quarter of the way to this batch's
		// average value size.
		avg := int64(needed / found)
		if old := db.multiGetAvgValue.Load(); old != 0 {
			avg = old + (avg-old)/4
		}
		db.multiGetAvgValue.Store(max(avg, 1))
	}
	return out, nil
}

// truncateKey shortens a key for an error message.
func truncateKey(k []byte) []byte {
	if len(k) > 64 {
		return k[:64]
	}
	return k
}
