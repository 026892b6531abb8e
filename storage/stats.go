package storage

/*
#include <stdlib.h>
#include "shale/engine.h"
*/
import "C"

import "unsafe"

// Stats are the engine's cumulative counters since Open and its current
// gauges (shale_stats_t). Bytes are bytes; times are microseconds.
type Stats struct {
	UserBytesWritten       uint64 // batch payload bytes accepted
	UserKeysWritten        uint64 // records accepted
	WALBytesWritten        uint64
	WALSyncs               uint64
	FlushBytesWritten      uint64
	CompactionBytesWritten uint64
	CompactionBytesRead    uint64
	BytesRead              uint64 // bytes of keys + values returned
	KeysRead               uint64
	StallMicros            uint64 // time writers spent slowed or stopped
	BlockCacheHits         uint64
	BlockCacheMisses       uint64
	BlockCacheUsage        uint64
	BlockCacheCapacity     uint64
	BloomFilterChecked     uint64
	BloomFilterUseful      uint64 // negatives: a data block read avoided
	MemtableBytes          uint64 // active + immutable
	NumImmutableMemtables  uint64
	FlushCount             uint64
	CompactionCount        uint64
	RunningFlushes         uint64
	RunningCompactions     uint64
	PendingCompactionBytes uint64
	LastSequence           uint64
	NumSnapshots           uint64
	LiveSSTBytes           uint64
	WALFileBytes           uint64 // size of live WAL files
	// BackgroundError is the sentinel of the error that stopped writes
	// (ErrNoSpace, ErrIO, ...), or nil.
	BackgroundError error
	// LevelFiles and LevelBytes have one entry per level, L0 first.
	LevelFiles []uint64
	LevelBytes []uint64
}

// WriteAmplification returns the bytes the engine wrote to disk (WAL,
// flushes and compactions) per byte of user data written, or 0 before any
// user write.
func (s *Stats) WriteAmplification() float64 {
	if s.UserBytesWritten == 0 {
		return 0
	}
	disk := s.WALBytesWritten + s.FlushBytesWritten + s.CompactionBytesWritten
	return float64(disk) / float64(s.UserBytesWritten)
}

// Stats reads the engine's statistics.
func (db *DB) Stats() (Stats, error) {
	var c C.shale_stats_t
	h, err := db.handle("Stats")
	if err != nil {
		return Stats{}, err
	}
	st := C.shale_get_stats(h, &c)
	db.mu.RUnlock()
	if err := statusToError("Stats", st); err != nil {
		return Stats{}, err
	}
	s := Stats{
		UserBytesWritten:       uint64(c.user_bytes_written),
		UserKeysWritten:        uint64(c.user_keys_written),
		WALBytesWritten:        uint64(c.wal_bytes_written),
		WALSyncs:               uint64(c.wal_syncs),
		FlushBytesWritten:      uint64(c.flush_bytes_written),
		CompactionBytesWritten: uint64(c.compaction_bytes_written),
		CompactionBytesRead:    uint64(c.compaction_bytes_read),
		BytesRead:              uint64(c.bytes_read),
		KeysRead:               uint64(c.keys_read),
		StallMicros:            uint64(c.stall_micros),
		BlockCacheHits:         uint64(c.block_cache_hits),
		BlockCacheMisses:       uint64(c.block_cache_misses),
		BlockCacheUsage:        uint64(c.block_cache_usage),
		BlockCacheCapacity:     uint64(c.block_cache_capacity),
		BloomFilterChecked:     uint64(c.bloom_filter_checked),
		BloomFilterUseful:      uint64(c.bloom_filter_useful),
		MemtableBytes:          uint64(c.memtable_bytes),
		NumImmutableMemtables:  uint64(c.num_immutable_memtables),
		FlushCount:             uint64(c.flush_count),
		CompactionCount:        uint64(c.compaction_count),
		RunningFlushes:         uint64(c.running_flushes),
		RunningCompactions:     uint64(c.running_compactions),
		PendingCompactionBytes: uint64(c.pending_compaction_bytes),
		LastSequence:           uint64(c.last_sequence),
		NumSnapshots:           uint64(c.num_snapshots),
		LiveSSTBytes:           uint64(c.live_sst_bytes),
		WALFileBytes:           uint64(c.wal_file_bytes),
	}
	if code := int(c.background_error); code != codeOK {
		s.BackgroundError = sentinelFor(code)
		if s.BackgroundError == nil {
			s.BackgroundError = &EngineError{Op: "background", Code: code}
		}
	}
	levels := min(max(int(c.num_levels), 0), MaxLevels)
	s.LevelFiles = make([]uint64, levels)
	s.LevelBytes = make([]uint64, levels)
	for i := 0; i < levels; i++ {
		s.LevelFiles[i] = uint64(c.level_files[i])
		s.LevelBytes[i] = uint64(c.level_bytes[i])
	}
	return s, nil
}

// Property returns a human-readable engine property ("shale.stats",
// "shale.levelstats", "shale.sstables"); ok is false for an unknown name.
func (db *DB) Property(name string) (value string, ok bool) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	h, err := db.handle("Property")
	if err != nil {
		return "", false
	}
	p := C.shale_get_property(h, cname)
	db.mu.RUnlock()
	if p == nil {
		return "", false
	}
	defer C.shale_free(unsafe.Pointer(p))
	return C.GoString(p), true
}

// ApproximateSize estimates the bytes and keys on disk whose keys fall in
// [start, end). A nil bound is unbounded. Data still in memtables is not
// counted.
func (db *DB) ApproximateSize(start, end []byte) (bytes, keys uint64, err error) {
	var b, k C.uint64_t
	h, err := db.handle("ApproximateSize")
	if err != nil {
		return 0, 0, err
	}
	st := C.shale_approximate_size(h, cBytesOrNil(start), C.size_t(len(start)), cBytesOrNil(end), C.size_t(len(end)), &b, &k)
	db.mu.RUnlock()
	if err := statusToError("ApproximateSize", st); err != nil {
		return 0, 0, err
	}
	return uint64(b), uint64(k), nil
}
