/*
 * engine.h: the public C surface of Shale's storage engine.
 *
 * This is the only header a user of the engine may include. It depends on
 * <stddef.h> and <stdint.h> alone, so that cgo and plain C can use it.
 *
 * Conventions (cf. LevelDB's c.h, libroach's DBStatus):
 *   - Handles are opaque pointers. Every handle returned by a *_new or
 *     *_open function is released by the matching *_free / *_close /
 *     *_release function, exactly once.
 *   - Byte strings cross as (pointer, length). The engine never keeps a
 *     pointer it was given past the return of the call, except where a
 *     function says otherwise: callers may pass memory they only own for the
 *     duration of the call (e.g. Go memory through cgo).
 *   - Every fallible call returns a shale_status_t by value. code is
 *     SHALE_OK on success; otherwise message, if non-NULL, is a NUL-terminated
 *     string allocated with malloc that the caller must release with
 *     shale_free(). Messages name the file and offset involved when there is
 *     one. No C++ exception ever crosses this boundary.
 *   - Booleans are uint8_t, 0 or 1.
 *   - Pointer arguments must be non-NULL unless the comment says NULL is
 *     allowed.
 *
 * Threads: a shale_db_t is safe for concurrent use by many threads without
 * external synchronization. A shale_iterator_t or shale_sst_writer_t must be
 * used by one thread at a time. Snapshots may be shared.
 *
 * The formats of the WriteBatch buffer accepted by shale_write and of the
 * entry buffers produced by shale_iter_next_batch are defined below and in
 * docs/formats.md. They are part of the on-disk and Raft-log format: they
 * are versioned and never change meaning.
 */
#ifndef SHALE_ENGINE_H_
#define SHALE_ENGINE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

/* Status codes. DO NOT CHANGE THESE VALUES: the Go binding maps them to
 * typed errors. */
enum {
  SHALE_OK = 0,
  SHALE_NOT_FOUND = 1,
  SHALE_CORRUPTION = 2,
  SHALE_NOT_SUPPORTED = 3,
  SHALE_INVALID_ARGUMENT = 4,
  SHALE_IO_ERROR = 5,
  /* The disk is full (ENOSPC). Writes fail until space returns; reads work. */
  SHALE_NO_SPACE = 6,
  /* A caller-provided buffer is too small; the needed size is reported. */
  SHALE_BUFFER_TOO_SMALL = 7,
  /* Writes are stopped by an earlier background error; the message says
   * which. Cleared by shale_resume() once the cause is gone. */
  SHALE_BACKGROUND_ERROR = 8,
  /* The database is closing or closed. */
  SHALE_CLOSED = 9,
  /* The operation did not complete in time (e.g. a write stall with
   * no_slowdown set). Nothing was written. */
  SHALE_BUSY = 10,
};

typedef struct shale_status_t {
  int32_t code;
  char* message; /* malloc'd or NULL; release with shale_free */
} shale_status_t;

/* Releases memory the engine allocated and handed out (status messages,
 * property strings). NULL is allowed. */
void shale_free(void* p);

/* Returns a static string such as "shale-engine 0.1.0". */
const char* shale_version(void);

/* --------------------------------------------------------------- options */

enum {
  SHALE_COMPRESSION_NONE = 0,
  SHALE_COMPRESSION_SNAPPY = 1,
};

/* How to treat a damaged WAL on recovery. */
enum {
  /* Drop a torn record at the very end of the last WAL (a crash mid-append);
   * any other damage is SHALE_CORRUPTION. The default. */
  SHALE_WAL_RECOVERY_TOLERATE_CORRUPTED_TAIL = 0,
  /* Any damage at all, even a torn tail, is SHALE_CORRUPTION. */
  SHALE_WAL_RECOVERY_ABSOLUTE_CONSISTENCY = 1,
  /* Stop replay at the first damaged record and open with everything before
   * it (recovers to the last consistent point). */
  SHALE_WAL_RECOVERY_POINT_IN_TIME = 2,
};

#define SHALE_MAX_LEVELS 7
/* The longest versioned_key_prefix (see shale_options_t). */
#define SHALE_MAX_VERSIONED_KEY_PREFIX 16

/* Database options. Initialize with shale_options_init, then override. The
 * defaults are documented next to each field and in docs/engine.md. */
typedef struct shale_options_t {
  uint8_t create_if_missing;             /* 1 */
  uint8_t error_if_exists;               /* 0 */
  uint8_t paranoid_checks;               /* 1: verify checksums on every read */
  int32_t wal_recovery_mode;             /* TOLERATE_CORRUPTED_TAIL */
  uint64_t write_buffer_size;            /* 64 MiB: memtable size */
  int32_t max_write_buffer_number;       /* 2: active + immutable memtables */
  uint64_t block_size;                   /* 4 KiB: SST data block target */
  int32_t block_restart_interval;        /* 16 */
  int32_t bloom_bits_per_key;            /* 10; 0 disables filters */
  int32_t compression;                   /* SHALE_COMPRESSION_SNAPPY */
  uint64_t block_cache_size;             /* 8 MiB */
  int32_t max_open_files;                /* -1: unbounded table cache */
  uint64_t target_file_size_base;        /* 64 MiB */
  uint64_t max_bytes_for_level_base;     /* 256 MiB */
  double max_bytes_for_level_multiplier; /* 10 */
  int32_t num_levels;                    /* 7 (<= SHALE_MAX_LEVELS) */
  int32_t level0_file_num_compaction_trigger; /* 4 */
  int32_t level0_slowdown_writes_trigger;     /* 20 */
  int32_t level0_stop_writes_trigger;         /* 36 */
  int32_t max_background_jobs;           /* 2: flush + compaction threads */
  uint8_t disable_auto_compactions;      /* 0 */
  uint64_t delayed_write_rate;           /* 16 MiB/s while slowed down */
  uint8_t cache_index_and_filter_blocks; /* 0: kept with the table reader */
  uint8_t use_mmap_reads;                /* 0: pread */
  uint64_t bytes_per_sync;               /* 0: no incremental SST syncs */
  /* 0. FOR TESTS ONLY: 1 opens the database over the engine's
   * fault-injection file layer, so that shale_set_io_delay can slow its
   * disk down. Costs a little on every file operation. */
  uint8_t fault_injection;
  /* Versioned keys (MVCC); 0 by default. 1: every key that begins with the
   * first versioned_key_prefix_len bytes of versioned_key_prefix (every key
   * when that is 0) ends with a version suffix whose length in bytes,
   * counting the suffix's last byte itself, is that last byte. Bloom
   * filters are then built and probed on the key without its suffix, so a
   * point read of any version of a key whose versions a table lacks is
   * answered by the filter. A key whose last byte is 0 or longer than what
   * follows the prefix is filtered whole. An SST records the setting it
   * was built with and is read without its filter under any other, so
   * changing the setting never hides data. A prefix without the setting,
   * or longer than SHALE_MAX_VERSIONED_KEY_PREFIX, is
   * SHALE_INVALID_ARGUMENT. */
  uint8_t split_version_suffix;
  uint8_t versioned_key_prefix_len; /* 0 */
  uint8_t versioned_key_prefix[SHALE_MAX_VERSIONED_KEY_PREFIX];
} shale_options_t;

void shale_options_init(shale_options_t* opts);

typedef struct shale_write_options_t {
  /* sync: the write is on stable storage (WAL fsync'd) before the call
   * returns. Concurrent synced writes share one fsync (group commit). */
  uint8_t sync;
  /* disable_wal: the write goes to the memtable only and is lost on a crash
   * until the next flush. */
  uint8_t disable_wal;
  /* no_slowdown: return SHALE_BUSY instead of waiting on a write stall. */
  uint8_t no_slowdown;
} shale_write_options_t;

typedef struct shale_snapshot_t shale_snapshot_t;

typedef struct shale_read_options_t {
  /* snapshot: read as of this snapshot; NULL reads the latest state. */
  const shale_snapshot_t* snapshot;
  uint8_t verify_checksums; /* 1 */
  uint8_t fill_cache;       /* 1: blocks read are added to the block cache */
} shale_read_options_t;

void shale_read_options_init(shale_read_options_t* ro);

/* ---------------------------------------------------------------- the DB */

typedef struct shale_db_t shale_db_t;

/* Opens (or creates) the database in directory path, replaying the WAL. On
 * success *db is set and must be closed with shale_close. */
shale_status_t shale_open(const shale_options_t* opts, const char* path,
                          shale_db_t** db);

/* Waits for background work to stop, releases the handle. Outstanding
 * iterators and snapshots must have been released first. */
shale_status_t shale_close(shale_db_t* db);

/* Deletes the database's files in path. The database must not be open. */
shale_status_t shale_destroy(const char* path);

/* Clears a background error once its cause is gone (e.g. disk space freed)
 * and lets writes and background work resume. */
shale_status_t shale_resume(shale_db_t* db);

/* ------------------------------------------------------------ WriteBatch */

/* A WriteBatch is one byte buffer, built by the caller:
 *
 *   batch  := header record*
 *   header := sequence: fixed64   (ignored on input; the engine assigns)
 *             count:    fixed32   (number of records)
 *   record := 0x00 varstring                   -- Delete(key)
 *           | 0x01 varstring varstring         -- Put(key, value)
 *           | 0x02 varstring varstring         -- DeleteRange(begin, end),
 *                                                 end exclusive
 *   varstring := len: varint32, bytes[len]
 *
 * fixed-width integers are little-endian. The records of one batch are
 * applied atomically and in order (a later record wins). The WAL stores these
 * bytes and a WAL is replayed by the next version of the engine, so tags
 * 0x00-0x02 are format version 1 and frozen; an unknown tag is
 * SHALE_CORRUPTION. */
enum {
  SHALE_BATCH_DELETE = 0x00,
  SHALE_BATCH_PUT = 0x01,
  SHALE_BATCH_DELETE_RANGE = 0x02,
};
#define SHALE_BATCH_HEADER_SIZE 12

/* Applies a WriteBatch atomically. An empty batch (count 0) is allowed. */
shale_status_t shale_write(shale_db_t* db, const shale_write_options_t* wo,
                           const uint8_t* batch, size_t batch_len);

/* Makes every write that returned before the call durable (fdatasyncs the
 * WAL), without holding up other writers while it syncs: a synced write
 * keeps the write queue through its fsync, this does not. A writer that
 * must not wait for fsyncs behind another's can write with sync = 0 and
 * then call this. A failed sync stops writes (see shale_resume). */
shale_status_t shale_sync_wal(shale_db_t* db);

/* ------------------------------------------------------------------ reads */

/* Reads key. On SHALE_OK, *value_len is the value's length and, if it is
 * <= value_cap, the value has been copied to value_buf. If the value is
 * larger, the call returns SHALE_BUFFER_TOO_SMALL with *value_len set to the
 * needed size and copies nothing; call again with a larger buffer (under a
 * snapshot if the two calls must see the same value). A missing key is
 * SHALE_NOT_FOUND. value_buf may be NULL when value_cap is 0. */
shale_status_t shale_get(shale_db_t* db, const shale_read_options_t* ro,
                         const uint8_t* key, size_t key_len, uint8_t* value_buf,
                         size_t value_cap, size_t* value_len);

/* Reads num_keys keys at one consistent point, grouping lookups per SST
 * file. Keys are packed in keys_buf: key i is
 * keys_buf[key_offsets[i] .. key_offsets[i+1]) (key_offsets has num_keys+1
 * entries). Values are packed into values_buf in key order: for each key i,
 * statuses[i] is SHALE_OK (value at values_buf + value_offsets[i], length
 * value_lens[i]), SHALE_NOT_FOUND, SHALE_BUFFER_TOO_SMALL (value_lens[i] is
 * its size; it did not fit in what was left of values_buf), or an error
 * code. The call returns SHALE_OK unless it could not run at all; per-key
 * failures are in statuses. */
shale_status_t shale_multi_get(shale_db_t* db, const shale_read_options_t* ro,
                               size_t num_keys, const uint8_t* keys_buf,
                               const size_t* key_offsets, uint8_t* values_buf,
                               size_t values_cap, size_t* value_offsets,
                               size_t* value_lens, int32_t* statuses);

/* Versioned point reads (databases opened with split_version_suffix): the
 * point reads of MVCC, answered by the Bloom filters when a key is absent.
 * Read i finds the first live entry at or after target i among the
 * versions of target i's key, i.e. the keys whose unversioned part (the key
 * without its version suffix, see split_version_suffix: what the filters
 * hold) equals target i's. Only the tables whose key range meets
 * [target, end of the keys starting with that part) and whose filter may
 * hold the part are read, so a read of a key that no table holds costs
 * filter probes and no data block. Entries with another unversioned part
 * are passed over; with prefix-free unversioned parts (package mvcc's) the
 * first entry past the key's versions ends the read. Every read sees one
 * sequence number (ro->snapshot's or the latest).
 *
 * Targets are packed as in shale_multi_get (keys_buf, key_offsets with
 * num_keys+1 entries). For each read i, statuses[i] is SHALE_OK (the
 * entry's key then its value at out_buf + out_offsets[i], key_lens[i] and
 * value_lens[i] bytes), SHALE_NOT_FOUND, SHALE_BUFFER_TOO_SMALL (the
 * lengths are set, nothing is copied: it did not fit in what was left of
 * out_buf), SHALE_INVALID_ARGUMENT (target i is not a versioned key: not
 * under versioned_key_prefix, or no valid suffix length), or a read error.
 * The call returns SHALE_NOT_SUPPORTED on a database without
 * split_version_suffix, otherwise SHALE_OK unless it could not run at
 * all. */
shale_status_t shale_multi_seek_prefix(shale_db_t* db,
                                       const shale_read_options_t* ro,
                                       size_t num_keys, const uint8_t* keys_buf,
                                       const size_t* key_offsets,
                                       uint8_t* out_buf, size_t out_cap,
                                       size_t* out_offsets, size_t* key_lens,
                                       size_t* value_lens, int32_t* statuses);

/* ------------------------------------------------------------- snapshots */

/* A snapshot pins the current state: reads through it see exactly the
 * writes made before it was taken. Release it with shale_snapshot_release
 * before closing the database. */
const shale_snapshot_t* shale_snapshot_new(shale_db_t* db);
void shale_snapshot_release(shale_db_t* db, const shale_snapshot_t* snap);
/* Returns the sequence number the snapshot reads at. */
uint64_t shale_snapshot_sequence(const shale_snapshot_t* snap);

/* ------------------------------------------------------------- iterators */

typedef struct shale_iterator_t shale_iterator_t;

/* Creates an iterator over the database (or ro->snapshot) restricted to
 * [lower, upper). lower and upper may be NULL (unbounded); their bytes are
 * copied. The iterator starts unpositioned. Free with shale_iter_free before
 * closing the database. */
shale_status_t shale_iter_new(shale_db_t* db, const shale_read_options_t* ro,
                              const uint8_t* lower, size_t lower_len,
                              const uint8_t* upper, size_t upper_len,
                              shale_iterator_t** it);
void shale_iter_free(shale_iterator_t* it);

/* Positioning. Each leaves the iterator at an entry or invalid. */
void shale_iter_seek_to_first(shale_iterator_t* it);
void shale_iter_seek_to_last(shale_iterator_t* it);
/* Seek: the first entry with key >= target. */
void shale_iter_seek(shale_iterator_t* it, const uint8_t* target, size_t len);
/* SeekForPrev: the last entry with key <= target. */
void shale_iter_seek_for_prev(shale_iterator_t* it, const uint8_t* target,
                              size_t len);

enum {
  /* Walk towards smaller keys (Prev) instead of larger ones (Next). */
  SHALE_ITER_REVERSE = 1u << 0,
  /* Emit keys with empty values. */
  SHALE_ITER_KEYS_ONLY = 1u << 1,
};

/* Copies entries into buf starting with the iterator's current entry and
 * moving by Next (or Prev with SHALE_ITER_REVERSE), until max_entries have
 * been emitted, the next entry would not fit in buf_cap, or the iterator is
 * exhausted. Each entry is encoded as
 *
 *   entry := key_len: fixed32, value_len: fixed32, key, value
 *
 * (little-endian, back to back). On return the iterator is at the first
 * entry not emitted; *num_entries and *bytes_used say what was written and
 * *valid says whether an entry remains. If even the first entry does not
 * fit, returns SHALE_BUFFER_TOO_SMALL with *bytes_used set to its encoded
 * size. An iteration error (I/O, corruption) is returned as the status after
 * the entries that preceded it. */
shale_status_t shale_iter_next_batch(shale_iterator_t* it, uint32_t flags,
                                     size_t max_entries, uint8_t* buf,
                                     size_t buf_cap, size_t* num_entries,
                                     size_t* bytes_used, uint8_t* valid);

/* Versioned reads (databases opened with split_version_suffix). With a
 * non-empty floor, forward shale_iter_next_batch calls emit, for each
 * versioned key, only its first version whose suffix (the last n bytes
 * of the key, n being its last byte) is at or above floor in byte order,
 * and step over its
 * other versions inside the engine; keys that are not versioned are
 * emitted as they are. When suffixes order versions newest first, the
 * floor is the suffix of a read version, and each key yields its newest
 * version at or below it: one entry per key crosses the boundary however
 * much history the key holds. The engine seeks over long runs of
 * versions, which requires the unversioned parts of keys to be prefix-free
 * (none is a proper prefix of another's, as package mvcc's escaped keys
 * are). The first entry after a seek is judged by
 * the floor alone (a seek into the middle of a key's versions sees the
 * versions from there on). A reverse batch fails with
 * SHALE_INVALID_ARGUMENT while a floor is set. floor_len 0 turns it off;
 * a floor on a database without split_version_suffix is
 * SHALE_NOT_SUPPORTED. The floor's bytes are copied. */
shale_status_t shale_iter_set_version_floor(shale_iterator_t* it,
                                            const uint8_t* floor,
                                            size_t floor_len);

/* ----------------------------------------------------- flush, compaction */

/* Flushes the memtable to an L0 file. wait: block until it is durable. */
shale_status_t shale_flush(shale_db_t* db, uint8_t wait);

/* Compacts every level over [begin, end) (NULL = unbounded) down to the
 * bottom level, waiting for completion. */
shale_status_t shale_compact_range(shale_db_t* db, const uint8_t* begin,
                                   size_t begin_len, const uint8_t* end,
                                   size_t end_len);

/* Blocks until no flush or compaction is pending or running. */
shale_status_t shale_wait_for_compaction(shale_db_t* db);

/* ------------------------------------------------------------ statistics */

/* Counters are cumulative since open. Write amplification is
 * (wal + flush + compaction bytes written) / user bytes written. */
typedef struct shale_stats_t {
  uint64_t user_bytes_written; /* batch payload bytes accepted */
  uint64_t user_keys_written;  /* records accepted */
  uint64_t wal_bytes_written;
  uint64_t wal_syncs;
  uint64_t flush_bytes_written;
  uint64_t compaction_bytes_written;
  uint64_t compaction_bytes_read;
  uint64_t bytes_read; /* bytes of keys + values returned */
  uint64_t keys_read;
  uint64_t stall_micros; /* time writers spent slowed or stopped */
  uint64_t block_cache_hits;
  uint64_t block_cache_misses;
  uint64_t block_cache_usage;    /* bytes */
  uint64_t block_cache_capacity; /* bytes */
  uint64_t bloom_filter_checked;
  uint64_t bloom_filter_useful; /* negatives: a data block read avoided */
  uint64_t memtable_bytes;      /* active + immutable */
  uint64_t num_immutable_memtables;
  uint64_t flush_count;
  uint64_t compaction_count;
  uint64_t running_flushes;
  uint64_t running_compactions;
  uint64_t pending_compaction_bytes;
  uint64_t last_sequence;
  uint64_t num_snapshots;
  uint64_t live_sst_bytes;
  uint64_t wal_file_bytes;  /* size of live WAL files */
  int32_t background_error; /* a SHALE_* code; SHALE_OK if none */
  int32_t num_levels;
  uint64_t level_files[SHALE_MAX_LEVELS];
  uint64_t level_bytes[SHALE_MAX_LEVELS];
} shale_stats_t;

shale_status_t shale_get_stats(shale_db_t* db, shale_stats_t* out);

/* Returns a malloc'd, human-readable property ("shale.stats",
 * "shale.levelstats", "shale.sstables"), or NULL for an unknown name.
 * Release with shale_free. */
char* shale_get_property(shale_db_t* db, const char* name);

/* Estimated bytes and keys on disk whose keys fall in [begin, end). */
shale_status_t shale_approximate_size(shale_db_t* db, const uint8_t* begin,
                                      size_t begin_len, const uint8_t* end,
                                      size_t end_len, uint64_t* bytes,
                                      uint64_t* keys);

/* ------------------------------------------ SST writer, ingestion, backup */

typedef struct shale_sst_writer_t shale_sst_writer_t;

/* Creates an SST file at path, using opts' block, filter and compression
 * settings. Entries must be added in strictly increasing key order. */
shale_status_t shale_sst_writer_open(const shale_options_t* opts,
                                     const char* path, shale_sst_writer_t** w);
shale_status_t shale_sst_writer_put(shale_sst_writer_t* w, const uint8_t* key,
                                    size_t key_len, const uint8_t* value,
                                    size_t value_len);
/* Adds entries in the shale_iter_next_batch encoding, keys ascending. */
shale_status_t shale_sst_writer_add_entries(shale_sst_writer_t* w,
                                            const uint8_t* buf, size_t len);
/* Records a range tombstone [begin, end) in the file. When the file is
 * ingested, the tombstone hides older data in the span but not the file's
 * own entries. */
shale_status_t shale_sst_writer_delete_range(shale_sst_writer_t* w,
                                             const uint8_t* begin,
                                             size_t begin_len,
                                             const uint8_t* end,
                                             size_t end_len);
/* Writes the index, filter and footer, syncs and closes the file. */
shale_status_t shale_sst_writer_finish(shale_sst_writer_t* w,
                                       uint64_t* file_size);
/* Frees the writer; an unfinished file is deleted. */
void shale_sst_writer_free(shale_sst_writer_t* w);

/* Ingests SST files made by shale_sst_writer atomically: after the call
 * every entry and range tombstone of every file is visible, as one newer
 * write. The files are moved (hard-linked, then unlinked) into the DB. */
shale_status_t shale_ingest(shale_db_t* db, size_t num_files,
                            const char* const* paths);

/* Creates a consistent copy of the database in dir (which must not exist):
 * SSTs are hard-linked, the MANIFEST and WAL copied. The copy opens as an
 * ordinary database. */
shale_status_t shale_checkpoint(shale_db_t* db, const char* dir);

/* ------------------------------------------ fault injection (tests only) */

/* Kinds of file operation a delay applies to (a bit mask). */
enum {
  SHALE_IO_APPEND = 1u << 0, /* appends to and flushes of any file */
  SHALE_IO_SYNC = 1u << 1,   /* fsyncs of files (WAL, SST, MANIFEST) and of
                                the database directory */
  SHALE_IO_CREATE = 1u << 2, /* creating a file */
  SHALE_IO_READ = 1u << 3,   /* reads, and opening a file to read it */
  SHALE_IO_RENAME = 1u << 4, /* renames (CURRENT, ingestion) */
};

/* The longest delay plus jitter shale_set_io_delay accepts: 60 s. */
#define SHALE_MAX_IO_DELAY_MICROS 60000000ull

/* FOR TESTS ONLY: simulates a slow disk. From now on, each file operation
 * of a kind in ops first sleeps delay_micros plus a uniformly random extra
 * in [0, jitter_micros]; delay and jitter 0 remove the delay of those
 * kinds. Kinds not in ops keep theirs. SHALE_IO_SYNC slows the WAL syncs of
 * synced writes and of shale_sync_wal (the ones a replicated log waits
 * on) as well as those of SSTs, the MANIFEST and the directory. The sleep
 * holds none of the engine's locks a sync would not hold.
 *
 * May be called at any time from any thread. Fails with
 * SHALE_NOT_SUPPORTED unless the database was opened with
 * opts->fault_injection = 1, and with SHALE_INVALID_ARGUMENT for an
 * unknown bit in ops or a delay plus jitter above
 * SHALE_MAX_IO_DELAY_MICROS; either way nothing changes. */
shale_status_t shale_set_io_delay(shale_db_t* db, uint32_t ops,
                                  uint64_t delay_micros,
                                  uint64_t jitter_micros);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SHALE_ENGINE_H_ */
