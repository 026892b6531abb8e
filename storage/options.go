package storage

// #include "shale/engine.h"
import "C"

import "fmt"

// Compression selects how SST data blocks are compressed.
type Compression int

const (
	// DefaultCompression is the engine's default: snappy.
	DefaultCompression Compression = iota
	// NoCompression stores blocks as they are.
	NoCompression
	// SnappyCompression compresses each block with snappy when that saves
	// enough to be worth it.
	SnappyCompression
)

func (c Compression) String() string {
	switch c {
	case DefaultCompression:
		return "default"
	case NoCompression:
		return "none"
	case SnappyCompression:
		return "snappy"
	}
	return fmt.Sprintf("Compression(%d)", int(c))
}

// ParseCompression parses "none" or "snappy" ("" and "default" give
// DefaultCompression).
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "default":
		return DefaultCompression, nil
	case "none":
		return NoCompression, nil
	case "snappy":
		return SnappyCompression, nil
	}
	return 0, errorf(ErrInvalidArgument, "unknown compression %q (want none or snappy)", s)
}

// WALRecoveryMode says how Open treats a damaged write-ahead log.
type WALRecoveryMode int

const (
	// TolerateCorruptedTail drops a torn record at the very end of the last
	// WAL (a crash mid-append); any other damage fails Open with
	// ErrCorruption. The default.
	TolerateCorruptedTail WALRecoveryMode = iota
	// AbsoluteConsistency fails Open on any damage, even a torn tail.
	AbsoluteConsistency
	// PointInTime stops replay at the first damaged record and opens with
	// everything before it.
	PointInTime
)

// Options configures Open. The zero value means "the engine's defaults" for
// every field: a zero numeric field keeps the engine default (listed beside
// each field), and every boolean is phrased so that false is the default.
// EngineDefaults reports the engine's defaults as the engine itself sets
// them.
type Options struct {
	// ErrorIfMissing fails Open when dir holds no database (by default one
	// is created).
	ErrorIfMissing bool
	// ErrorIfExists fails Open when dir already holds a database.
	ErrorIfExists bool
	// DisableParanoidChecks skips checksum verification of every read
	// (checks are on by default).
	DisableParanoidChecks bool
	// WALRecovery: how to treat a damaged WAL (TolerateCorruptedTail).
	WALRecovery WALRecoveryMode

	// WriteBufferSize is the memtable size in bytes (64 MiB).
	WriteBufferSize uint64
	// MaxWriteBufferNumber counts the active plus immutable memtables (2).
	MaxWriteBufferNumber int
	// BlockSize is the SST data block target in bytes (4 KiB).
	BlockSize uint64
	// BlockRestartInterval is the number of keys between restart points (16).
	BlockRestartInterval int
	// BloomBitsPerKey sizes the per-file Bloom filter (10). Negative
	// disables filters.
	BloomBitsPerKey int
	// Compression of SST blocks (snappy).
	Compression Compression
	// BlockCacheSize is the block cache capacity in bytes (8 MiB).
	BlockCacheSize uint64
	// MaxOpenFiles bounds the table cache (unbounded). Negative also means
	// unbounded.
	MaxOpenFiles int
	// TargetFileSizeBase is the target SST size in bytes (64 MiB).
	TargetFileSizeBase uint64
	// MaxBytesForLevelBase is L1's target size in bytes (256 MiB).
	MaxBytesForLevelBase uint64
	// MaxBytesForLevelMultiplier is the growth factor between levels (10).
	MaxBytesForLevelMultiplier float64
	// NumLevels is the number of LSM levels (7, at most MaxLevels).
	NumLevels int
	// L0CompactionTrigger is the L0 file count that starts a compaction (4).
	L0CompactionTrigger int
	// L0SlowdownWritesTrigger is the L0 file count that slows writes (20).
	L0SlowdownWritesTrigger int
	// L0StopWritesTrigger is the L0 file count that stops writes (36).
	L0StopWritesTrigger int
	// MaxBackgroundJobs is the number of flush + compaction threads (2).
	MaxBackgroundJobs int
	// DisableAutoCompactions turns background compactions off.
	DisableAutoCompactions bool
	// DelayedWriteRate is the write rate in bytes/s while slowed down
	// (16 MiB/s).
	DelayedWriteRate uint64
	// CacheIndexAndFilterBlocks keeps index and filter blocks in the block
	// cache instead of with each table reader.
	CacheIndexAndFilterBlocks bool
	// UseMmapReads reads SSTs through mmap instead of pread.
	UseMmapReads bool
	// BytesPerSync syncs SSTs incrementally every this many bytes (0: off).
	BytesPerSync uint64

	// SplitVersionSuffix declares versioned keys (MVCC): every key that
	// begins with VersionedKeyPrefix (every key when it is empty) ends with
	// a version suffix whose length in bytes, counting the suffix's last
	// byte itself, is that last byte. Bloom filters are then built and
	// probed on the key without its suffix, so a point read of any version
	// of a key that a table lacks is answered by the filter. A key whose
	// last byte is 0 or longer than what follows the prefix is filtered
	// whole. A table records the setting it was built with and is read
	// without its filter under another, so changing it never hides data.
	SplitVersionSuffix bool
	// VersionedKeyPrefix is the prefix of the keys SplitVersionSuffix
	// applies to, at most MaxVersionedKeyPrefix bytes.
	VersionedKeyPrefix []byte

	// FaultInjection, for tests only, opens the database over the engine's
	// fault-injection file layer so that SetIODelay can slow its disk
	// down. It costs a little on every file operation.
	FaultInjection bool
}

// MaxLevels is the largest NumLevels the engine supports.
const MaxLevels = C.SHALE_MAX_LEVELS

// MaxVersionedKeyPrefix is the longest Options.VersionedKeyPrefix.
const MaxVersionedKeyPrefix = C.SHALE_MAX_VERSIONED_KEY_PREFIX

// EngineDefaults returns the engine's default options, read from
// shale_options_init, expressed as an Options with every field filled in.
// Passing it to Open is the same as passing the zero Options.
func EngineDefaults() Options {
	var c C.shale_options_t
	C.shale_options_init(&c)
	o := Options{
		ErrorIfMissing:             c.create_if_missing == 0,
		ErrorIfExists:              c.error_if_exists != 0,
		DisableParanoidChecks:      c.paranoid_checks == 0,
		WALRecovery:                WALRecoveryMode(c.wal_recovery_mode),
		WriteBufferSize:            uint64(c.write_buffer_size),
		MaxWriteBufferNumber:       int(c.max_write_buffer_number),
		BlockSize:                  uint64(c.block_size),
		BlockRestartInterval:       int(c.block_restart_interval),
		BloomBitsPerKey:            int(c.bloom_bits_per_key),
		BlockCacheSize:             uint64(c.block_cache_size),
		MaxOpenFiles:               int(c.max_open_files),
		TargetFileSizeBase:         uint64(c.target_file_size_base),
		MaxBytesForLevelBase:       uint64(c.max_bytes_for_level_base),
		MaxBytesForLevelMultiplier: float64(c.max_bytes_for_level_multiplier),
		NumLevels:                  int(c.num_levels),
		L0CompactionTrigger:        int(c.level0_file_num_compaction_trigger),
		L0SlowdownWritesTrigger:    int(c.level0_slowdown_writes_trigger),
		L0StopWritesTrigger:        int(c.level0_stop_writes_trigger),
		MaxBackgroundJobs:          int(c.max_background_jobs),
		DisableAutoCompactions:     c.disable_auto_compactions != 0,
		DelayedWriteRate:           uint64(c.delayed_write_rate),
		CacheIndexAndFilterBlocks:  c.cache_index_and_filter_blocks != 0,
		UseMmapReads:               c.use_mmap_reads != 0,
		BytesPerSync:               uint64(c.bytes_per_sync),
	}
	if o.BloomBitsPerKey == 0 {
		o.BloomBitsPerKey = -1
	}
	switch c.compression {
	case C.SHALE_COMPRESSION_NONE:
		o.Compression = NoCompression
	case C.SHALE_COMPRESSION_SNAPPY:
		o.Compression = SnappyCompression
	}
	return o
}

// validate rejects options the engine could not honour, with a message that
// names the field.
func (o *Options) validate() error {
	switch {
	case o.NumLevels < 0 || o.NumLevels > MaxLevels:
		return errorf(ErrInvalidArgument, "Options.NumLevels %d: must be 1..%d", o.NumLevels, MaxLevels)
	case o.MaxWriteBufferNumber < 0:
		return errorf(ErrInvalidArgument, "Options.MaxWriteBufferNumber %d is negative", o.MaxWriteBufferNumber)
	case o.BlockRestartInterval < 0:
		return errorf(ErrInvalidArgument, "Options.BlockRestartInterval %d is negative", o.BlockRestartInterval)
	case o.MaxBackgroundJobs < 0:
		return errorf(ErrInvalidArgument, "Options.MaxBackgroundJobs %d is negative", o.MaxBackgroundJobs)
	case o.MaxBytesForLevelMultiplier < 0:
		return errorf(ErrInvalidArgument, "Options.MaxBytesForLevelMultiplier %g is negative", o.MaxBytesForLevelMultiplier)
	case o.L0CompactionTrigger < 0 || o.L0SlowdownWritesTrigger < 0 || o.L0StopWritesTrigger < 0:
		return errorf(ErrInvalidArgument, "Options: L0 triggers must not be negative")
	case o.WALRecovery < TolerateCorruptedTail || o.WALRecovery > PointInTime:
		return errorf(ErrInvalidArgument, "Options.WALRecovery %d is not a known mode", o.WALRecovery)
	case len(o.VersionedKeyPrefix) > MaxVersionedKeyPrefix:
		return errorf(ErrInvalidArgument, "Options.VersionedKeyPrefix is %d bytes, more than %d", len(o.VersionedKeyPrefix), MaxVersionedKeyPrefix)
	case len(o.VersionedKeyPrefix) > 0 && !o.SplitVersionSuffix:
		return errorf(ErrInvalidArgument, "Options.VersionedKeyPrefix is set but SplitVersionSuffix is not")
	case o.Compression < DefaultCompression || o.Compression > SnappyCompression:
		return errorf(ErrInvalidArgument, "Options.Compression %d is not a known compression", o.Compression)
	}
	return nil
}

// toC fills c with the engine defaults overridden by o's non-zero fields.
// REQUIRES: o.validate() == nil.
func (o *Options) toC(c *C.shale_options_t) {
	C.shale_options_init(c)
	if o.ErrorIfMissing {
		c.create_if_missing = 0
	}
	if o.ErrorIfExists {
		c.error_if_exists = 1
	}
	if o.DisableParanoidChecks {
		c.paranoid_checks = 0
	}
	c.wal_recovery_mode = C.int32_t(o.WALRecovery)
	setU64(&c.write_buffer_size, o.WriteBufferSize)
	setI32(&c.max_write_buffer_number, o.MaxWriteBufferNumber)
	setU64(&c.block_size, o.BlockSize)
	setI32(&c.block_restart_interval, o.BlockRestartInterval)
	switch {
	case o.BloomBitsPerKey < 0:
		c.bloom_bits_per_key = 0
	case o.BloomBitsPerKey > 0:
		c.bloom_bits_per_key = C.int32_t(o.BloomBitsPerKey)
	}
	switch o.Compression {
	case NoCompression:
		c.compression = C.SHALE_COMPRESSION_NONE
	case SnappyCompression:
		c.compression = C.SHALE_COMPRESSION_SNAPPY
	}
	setU64(&c.block_cache_size, o.BlockCacheSize)
	switch {
	case o.MaxOpenFiles < 0:
		c.max_open_files = -1
	case o.MaxOpenFiles > 0:
		c.max_open_files = C.int32_t(o.MaxOpenFiles)
	}
	setU64(&c.target_file_size_base, o.TargetFileSizeBase)
	setU64(&c.max_bytes_for_level_base, o.MaxBytesForLevelBase)
	if o.MaxBytesForLevelMultiplier > 0 {
		c.max_bytes_for_level_multiplier = C.double(o.MaxBytesForLevelMultiplier)
	}
	setI32(&c.num_levels, o.NumLevels)
	setI32(&c.level0_file_num_compaction_trigger, o.L0CompactionTrigger)
	setI32(&c.level0_slowdown_writes_trigger, o.L0SlowdownWritesTrigger)
	setI32(&c.level0_stop_writes_trigger, o.L0StopWritesTrigger)
	setI32(&c.max_background_jobs, o.MaxBackgroundJobs)
	if o.DisableAutoCompactions {
		c.disable_auto_compactions = 1
	}
	setU64(&c.delayed_write_rate, o.DelayedWriteRate)
	if o.CacheIndexAndFilterBlocks {
		c.cache_index_and_filter_blocks = 1
	}
	if o.UseMmapReads {
		c.use_mmap_reads = 1
	}
	setU64(&c.bytes_per_sync, o.BytesPerSync)
	if o.FaultInjection {
		c.fault_injection = 1
	}
	if o.SplitVersionSuffix {
		c.split_version_suffix = 1
	}
	c.versioned_key_prefix_len = C.uint8_t(len(o.VersionedKeyPrefix))
	for i, b := range o.VersionedKeyPrefix {
		c.versioned_key_prefix[i] = C.uint8_t(b)
	}
}

func setU64(dst *C.uint64_t, v uint64) {
	if v != 0 {
		*dst = C.uint64_t(v)
	}
}

func setI32(dst *C.int32_t, v int) {
	if v != 0 {
		*dst = C.int32_t(v)
	}
}

// WriteOptions control one Write.
type WriteOptions struct {
	// Sync: the write is on stable storage (WAL fsync'd) before Write
	// returns. Concurrent synced writes share one fsync (group commit).
	Sync bool
	// DisableWAL: the write goes to the memtable only and is lost on a
	// crash until the next flush.
	DisableWAL bool
	// NoSlowdown: fail with ErrBusy instead of waiting on a write stall.
	NoSlowdown bool
}

// Sync is WriteOptions{Sync: true}, the options of every acknowledged write.
var Sync = WriteOptions{Sync: true}

// NoSync is WriteOptions{}: the write is in the WAL's OS buffers when Write
// returns and survives a process crash, but not a machine crash.
var NoSync = WriteOptions{}

func (wo WriteOptions) toC() C.shale_write_options_t {
	var c C.shale_write_options_t
	if wo.Sync {
		c.sync = 1
	}
	if wo.DisableWAL {
		c.disable_wal = 1
	}
	if wo.NoSlowdown {
		c.no_slowdown = 1
	}
	return c
}

// IterOptions configure a new Iterator.
type IterOptions struct {
	// LowerBound is the inclusive lower bound; nil means unbounded.
	LowerBound []byte
	// UpperBound is the exclusive upper bound; nil means unbounded.
	UpperBound []byte
	// KeysOnly makes every Value empty: values are not copied out of the
	// engine at all, which makes key scans cheaper.
	KeysOnly bool
	// VersionFloor, on a database opened with SplitVersionSuffix, makes
	// the iterator yield for each versioned key only its first version
	// whose suffix is at or above VersionFloor in byte order; the engine
	// steps over the key's other versions without copying them out. With
	// suffixes that order versions newest first (package mvcc's), the
	// floor is the suffix of a read version and each key yields its newest
	// version at or below it. Keys that are not versioned are yielded as
	// usual. The first entry after a seek is judged by the floor alone. An
	// iterator with a floor reads forward only: Last, SeekLT and Prev fail
	// with ErrInvalidArgument. NewIter fails with ErrNotSupported on a
	// database without SplitVersionSuffix.
	VersionFloor []byte
}
