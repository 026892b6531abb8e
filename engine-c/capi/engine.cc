// The C API of include/shale/engine.h over the engine's C++ classes.
//
// Each handle is a small struct around the C++ object. Statuses map one for
// one (util/status.h codes equal the SHALE_* codes). No exception crosses
// the boundary: every entry point that can allocate catches and reports.

#include "shale/engine.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "db/db_impl.h"
#include "db/db_iter.h"
#include "db/options.h"
#include "db/snapshot.h"
#include "db/sst_file_writer.h"
#include "table/version_suffix_filter.h"
#include "util/coding.h"
#include "util/fault_injection_env.h"

using shale::DBImpl;
using shale::DBIter;
using shale::FaultInjectionEnv;
using shale::Slice;
using shale::Status;

struct shale_db_t {
  // The fault-injection layer the DB was opened over, or null. Declared
  // first so that it is destroyed after the DB that uses it.
  std::unique_ptr<shale::FaultInjectionEnv> fault_env;
  std::unique_ptr<DBImpl> rep;
};

struct shale_iterator_t {
  std::unique_ptr<DBIter> rep;
  DBImpl* db;
  // shale_iter_set_version_floor: the floor ("" when off), and the
  // unversioned key whose visible version was emitted last (its other
  // versions are stepped over); has_last is cleared by every seek.
  std::string version_floor;
  std::string last_key;
  bool has_last = false;
};

struct shale_snapshot_t {
  const shale::Snapshot* rep;
};

struct shale_sst_writer_t {
  std::unique_ptr<shale::SstFileWriter> rep;
};

namespace {

char* CopyString(const std::string& s) {
  char* p = static_cast<char*>(malloc(s.size() + 1));
  if (p == nullptr) return nullptr;
  memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

shale_status_t ToC(const Status& s) {
  shale_status_t r;
  r.code = static_cast<int32_t>(s.code());
  r.message = nullptr;
  if (!s.ok() && !s.message().empty()) r.message = CopyString(s.ToString());
  return r;
}

shale_status_t Ok() { return shale_status_t{SHALE_OK, nullptr}; }

shale_status_t Error(int32_t code, const std::string& msg) {
  return shale_status_t{code, CopyString(msg)};
}

// Runs fn, turning any escaping C++ exception into an error status.
template <typename Fn>
shale_status_t Guard(const char* what, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Error(SHALE_IO_ERROR, std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return Error(SHALE_IO_ERROR, std::string(what) + ": " + e.what());
  } catch (...) {
    return Error(SHALE_IO_ERROR, std::string(what) + ": unknown exception");
  }
}

shale_status_t NullArgument(const char* what) {
  return Error(SHALE_INVALID_ARGUMENT,
               std::string(what) + ": a required pointer argument is NULL");
}

Status ToOptions(const shale_options_t* c, shale::Options* o) {
  o->create_if_missing = c->create_if_missing != 0;
  o->error_if_exists = c->error_if_exists != 0;
  o->paranoid_checks = c->paranoid_checks != 0;
  if (c->wal_recovery_mode < SHALE_WAL_RECOVERY_TOLERATE_CORRUPTED_TAIL ||
      c->wal_recovery_mode > SHALE_WAL_RECOVERY_POINT_IN_TIME) {
    return Status::InvalidArgument("options: unknown wal_recovery_mode " +
                                   std::to_string(c->wal_recovery_mode));
  }
  o->wal_recovery_mode =
      static_cast<shale::WalRecoveryMode>(c->wal_recovery_mode);
  o->write_buffer_size = c->write_buffer_size;
  o->max_write_buffer_number = c->max_write_buffer_number;
  o->block_size = c->block_size;
  o->block_restart_interval = c->block_restart_interval;
  o->bloom_bits_per_key = c->bloom_bits_per_key;
  if (c->compression != SHALE_COMPRESSION_NONE &&
      c->compression != SHALE_COMPRESSION_SNAPPY) {
    return Status::InvalidArgument("options: unknown compression " +
                                   std::to_string(c->compression));
  }
  o->compression = static_cast<shale::CompressionType>(c->compression);
  o->block_cache_size = c->block_cache_size;
  o->max_open_files = c->max_open_files;
  o->target_file_size_base = c->target_file_size_base;
  o->max_bytes_for_level_base = c->max_bytes_for_level_base;
  o->max_bytes_for_level_multiplier = c->max_bytes_for_level_multiplier;
  o->num_levels = c->num_levels;
  o->level0_file_num_compaction_trigger = c->level0_file_num_compaction_trigger;
  o->level0_slowdown_writes_trigger = c->level0_slowdown_writes_trigger;
  o->level0_stop_writes_trigger = c->level0_stop_writes_trigger;
  o->max_background_jobs = c->max_background_jobs;
  o->disable_auto_compactions = c->disable_auto_compactions != 0;
  o->delayed_write_rate = c->delayed_write_rate;
  o->cache_index_and_filter_blocks = c->cache_index_and_filter_blocks != 0;
  o->use_mmap_reads = c->use_mmap_reads != 0;
  o->bytes_per_sync = c->bytes_per_sync;
  o->split_version_suffix = c->split_version_suffix != 0;
  if (c->versioned_key_prefix_len > SHALE_MAX_VERSIONED_KEY_PREFIX) {
    return Status::InvalidArgument(
        "options: versioned_key_prefix_len " +
        std::to_string(c->versioned_key_prefix_len) + " is above " +
        std::to_string(SHALE_MAX_VERSIONED_KEY_PREFIX));
  }
  o->versioned_key_prefix.assign(
      reinterpret_cast<const char*>(c->versioned_key_prefix),
      c->versioned_key_prefix_len);
  return o->Validate();
}

shale::ReadOptions ToReadOptions(const shale_read_options_t* ro) {
  shale::ReadOptions r;
  if (ro != nullptr) {
    r.snapshot = ro->snapshot != nullptr ? ro->snapshot->rep : nullptr;
    r.verify_checksums = ro->verify_checksums != 0;
    r.fill_cache = ro->fill_cache != 0;
  }
  return r;
}

}  // namespace

extern "C" {

void shale_free(void* p) { free(p); }

const char* shale_version(void) { return "shale-engine 0.1.0"; }

void shale_options_init(shale_options_t* opts) {
  const shale::Options d;
  memset(opts, 0, sizeof(*opts));
  opts->create_if_missing = d.create_if_missing;
  opts->error_if_exists = d.error_if_exists;
  opts->paranoid_checks = d.paranoid_checks;
  opts->wal_recovery_mode = static_cast<int32_t>(d.wal_recovery_mode);
  opts->write_buffer_size = d.write_buffer_size;
  opts->max_write_buffer_number = d.max_write_buffer_number;
  opts->block_size = d.block_size;
  opts->block_restart_interval = d.block_restart_interval;
  opts->bloom_bits_per_key = d.bloom_bits_per_key;
  opts->compression = d.compression;
  opts->block_cache_size = d.block_cache_size;
  opts->max_open_files = d.max_open_files;
  opts->target_file_size_base = d.target_file_size_base;
  opts->max_bytes_for_level_base = d.max_bytes_for_level_base;
  opts->max_bytes_for_level_multiplier = d.max_bytes_for_level_multiplier;
  opts->num_levels = d.num_levels;
  opts->level0_file_num_compaction_trigger =
      d.level0_file_num_compaction_trigger;
  opts->level0_slowdown_writes_trigger = d.level0_slowdown_writes_trigger;
  opts->level0_stop_writes_trigger = d.level0_stop_writes_trigger;
  opts->max_background_jobs = d.max_background_jobs;
  opts->disable_auto_compactions = d.disable_auto_compactions;
  opts->delayed_write_rate = d.delayed_write_rate;
  opts->cache_index_and_filter_blocks = d.cache_index_and_filter_blocks;
  opts->use_mmap_reads = d.use_mmap_reads;
  opts->bytes_per_sync = d.bytes_per_sync;
  opts->fault_injection = 0;
  opts->split_version_suffix = d.split_version_suffix;
  opts->versioned_key_prefix_len = 0;
  memset(opts->versioned_key_prefix, 0, sizeof(opts->versioned_key_prefix));
}

void shale_read_options_init(shale_read_options_t* ro) {
  ro->snapshot = nullptr;
  ro->verify_checksums = 1;
  ro->fill_cache = 1;
}

shale_status_t shale_open(const shale_options_t* opts, const char* path,
                          shale_db_t** db) {
  if (opts == nullptr || path == nullptr || db == nullptr) {
    return NullArgument("open");
  }
  *db = nullptr;
  return Guard("open", [&] {
    shale::Options options;
    Status s = ToOptions(opts, &options);
    std::unique_ptr<FaultInjectionEnv> fault_env;
    if (opts->fault_injection != 0) {
      fault_env = std::make_unique<FaultInjectionEnv>(shale::Env::Default());
      options.env = fault_env.get();
    }
    std::unique_ptr<DBImpl> impl;
    if (s.ok()) s = DBImpl::Open(options, path, &impl);
    if (!s.ok()) return ToC(s);
    *db = new shale_db_t{std::move(fault_env), std::move(impl)};
    return Ok();
  });
}

shale_status_t shale_close(shale_db_t* db) {
  if (db == nullptr) return NullArgument("close");
  return Guard("close", [&] {
    Status s = db->rep->Close();
    if (s.IsInvalidArgument()) {
      // Iterators or snapshots are still open: the DB stays open.
      return ToC(s);
    }
    delete db;
    return ToC(s);
  });
}

shale_status_t shale_destroy(const char* path) {
  if (path == nullptr) return NullArgument("destroy");
  return Guard("destroy", [&] { return ToC(DBImpl::Destroy(path)); });
}

shale_status_t shale_resume(shale_db_t* db) {
  if (db == nullptr) return NullArgument("resume");
  return Guard("resume", [&] { return ToC(db->rep->Resume()); });
}

shale_status_t shale_write(shale_db_t* db, const shale_write_options_t* wo,
                           const uint8_t* batch, size_t batch_len) {
  if (db == nullptr || wo == nullptr || batch == nullptr) {
    return NullArgument("write");
  }
  return Guard("write", [&] {
    shale::WriteOptions options;
    options.sync = wo->sync != 0;
    options.disable_wal = wo->disable_wal != 0;
    options.no_slowdown = wo->no_slowdown != 0;
    return ToC(db->rep->Write(options, Slice(batch, batch_len)));
  });
}

// The C bits are the Env's (compared as integers: they are two enums).
static_assert(
    uint32_t{SHALE_IO_APPEND} == uint32_t{FaultInjectionEnv::kAppend} &&
        uint32_t{SHALE_IO_SYNC} == uint32_t{FaultInjectionEnv::kSync} &&
        uint32_t{SHALE_IO_CREATE} == uint32_t{FaultInjectionEnv::kCreate} &&
        uint32_t{SHALE_IO_READ} == uint32_t{FaultInjectionEnv::kRead} &&
        uint32_t{SHALE_IO_RENAME} == uint32_t{FaultInjectionEnv::kRename},
    "SHALE_IO_* must equal FaultInjectionEnv::Op");

shale_status_t shale_set_io_delay(shale_db_t* db, uint32_t ops,
                                  uint64_t delay_micros,
                                  uint64_t jitter_micros) {
  if (db == nullptr) return NullArgument("set_io_delay");
  if (db->fault_env == nullptr) {
    return Error(SHALE_NOT_SUPPORTED,
                 "set_io_delay: the database was not opened with "
                 "fault_injection (a test-only option)");
  }
  if ((ops & ~static_cast<uint32_t>(FaultInjectionEnv::kAllOps)) != 0) {
    return Error(SHALE_INVALID_ARGUMENT,
                 "set_io_delay: unknown operation bits " + std::to_string(ops));
  }
  if (delay_micros > SHALE_MAX_IO_DELAY_MICROS ||
      jitter_micros > SHALE_MAX_IO_DELAY_MICROS - delay_micros) {
    return Error(SHALE_INVALID_ARGUMENT,
                 "set_io_delay: delay " + std::to_string(delay_micros) +
                     "us + jitter " + std::to_string(jitter_micros) +
                     "us exceeds the 60 s limit");
  }
  db->fault_env->SetDelay(ops, delay_micros, jitter_micros);
  return Ok();
}

shale_status_t shale_sync_wal(shale_db_t* db) {
  if (db == nullptr) return NullArgument("sync_wal");
  return Guard("sync_wal", [&] { return ToC(db->rep->SyncWAL()); });
}

shale_status_t shale_get(shale_db_t* db, const shale_read_options_t* ro,
                         const uint8_t* key, size_t key_len, uint8_t* value_buf,
                         size_t value_cap, size_t* value_len) {
  if (db == nullptr || ro == nullptr || value_len == nullptr ||
      (key == nullptr && key_len > 0) ||
      (value_buf == nullptr && value_cap > 0)) {
    return NullArgument("get");
  }
  return Guard("get", [&] {
    return ToC(db->rep->Get(
        ToReadOptions(ro),
        Slice(key == nullptr ? "" : reinterpret_cast<const char*>(key),
              key_len),
        reinterpret_cast<char*>(value_buf), value_cap, value_len));
  });
}

shale_status_t shale_multi_get(shale_db_t* db, const shale_read_options_t* ro,
                               size_t num_keys, const uint8_t* keys_buf,
                               const size_t* key_offsets, uint8_t* values_buf,
                               size_t values_cap, size_t* value_offsets,
                               size_t* value_lens, int32_t* statuses) {
  if (db == nullptr || ro == nullptr || key_offsets == nullptr ||
      (num_keys > 0 && (value_offsets == nullptr || value_lens == nullptr ||
                        statuses == nullptr)) ||
      (keys_buf == nullptr && key_offsets[num_keys] > 0) ||
      (values_buf == nullptr && values_cap > 0)) {
    return NullArgument("multi_get");
  }
  return Guard("multi_get", [&] {
    std::vector<Slice> keys(num_keys);
    for (size_t i = 0; i < num_keys; i++) {
      if (key_offsets[i] > key_offsets[i + 1]) {
        return Error(
            SHALE_INVALID_ARGUMENT,
            "multi_get: key_offsets decrease at index " + std::to_string(i));
      }
      keys[i] = Slice(reinterpret_cast<const char*>(keys_buf) + key_offsets[i],
                      key_offsets[i + 1] - key_offsets[i]);
    }
    std::vector<std::string> values(num_keys);
    std::vector<Status> results(num_keys);
    db->rep->MultiGet(ToReadOptions(ro), num_keys, keys.data(), values.data(),
                      results.data());
    size_t pos = 0;
    for (size_t i = 0; i < num_keys; i++) {
      value_offsets[i] = pos;
      value_lens[i] = 0;
      if (!results[i].ok()) {
        statuses[i] = static_cast<int32_t>(results[i].code());
        continue;
      }
      const std::string& v = values[i];
      value_lens[i] = v.size();
      if (v.size() > values_cap - pos) {
        statuses[i] = SHALE_BUFFER_TOO_SMALL;
        continue;
      }
      if (!v.empty()) memcpy(values_buf + pos, v.data(), v.size());
      pos += v.size();
      statuses[i] = SHALE_OK;
    }
    return Ok();
  });
}

namespace {

// Where shale_multi_seek_prefix copies the entries it finds.
struct SeekPrefixOut {
  uint8_t* buf;
  size_t cap;
  size_t pos;
  size_t* offsets;
  size_t* key_lens;
  size_t* value_lens;
  int32_t* statuses;
};

void CopySeekPrefixEntry(void* arg, size_t i, const Slice& key,
                         const Slice& value) {
  auto* out = static_cast<SeekPrefixOut*>(arg);
  out->offsets[i] = out->pos;
  out->key_lens[i] = key.size();
  out->value_lens[i] = value.size();
  const size_t need = key.size() + value.size();
  if (need > out->cap - out->pos) {
    out->statuses[i] = SHALE_BUFFER_TOO_SMALL;
    return;
  }
  memcpy(out->buf + out->pos, key.data(), key.size());
  if (!value.empty()) {
    memcpy(out->buf + out->pos + key.size(), value.data(), value.size());
  }
  out->pos += need;
  out->statuses[i] = SHALE_OK;
}

}  // namespace

shale_status_t shale_multi_seek_prefix(shale_db_t* db,
                                       const shale_read_options_t* ro,
                                       size_t num_keys, const uint8_t* keys_buf,
                                       const size_t* key_offsets,
                                       uint8_t* out_buf, size_t out_cap,
                                       size_t* out_offsets, size_t* key_lens,
                                       size_t* value_lens, int32_t* statuses) {
  if (db == nullptr || ro == nullptr || key_offsets == nullptr ||
      (num_keys > 0 && (out_offsets == nullptr || key_lens == nullptr ||
                        value_lens == nullptr || statuses == nullptr)) ||
      (keys_buf == nullptr && key_offsets[num_keys] > 0) ||
      (out_buf == nullptr && out_cap > 0)) {
    return NullArgument("multi_seek_prefix");
  }
  if (!db->rep->options().split_version_suffix) {
    return Error(SHALE_NOT_SUPPORTED,
                 "multi_seek_prefix: the database was not opened with "
                 "split_version_suffix");
  }
  return Guard("multi_seek_prefix", [&] {
    // One target (a put's read of its key's newest version) needs no
    // allocation.
    Slice one_target;
    Status one_result;
    std::vector<Slice> many_targets;
    std::vector<Status> many_results;
    Slice* targets = &one_target;
    Status* results = &one_result;
    if (num_keys > 1) {
      many_targets.resize(num_keys);
      many_results.resize(num_keys);
      targets = many_targets.data();
      results = many_results.data();
    }
    for (size_t i = 0; i < num_keys; i++) {
      if (key_offsets[i] > key_offsets[i + 1]) {
        return Error(SHALE_INVALID_ARGUMENT,
                     "multi_seek_prefix: key_offsets decrease at index " +
                         std::to_string(i));
      }
      targets[i] =
          Slice(reinterpret_cast<const char*>(keys_buf) + key_offsets[i],
                key_offsets[i + 1] - key_offsets[i]);
      out_offsets[i] = 0;
      key_lens[i] = 0;
      value_lens[i] = 0;
    }
    SeekPrefixOut out{out_buf,  out_cap,    0,       out_offsets,
                      key_lens, value_lens, statuses};
    db->rep->SeekPrefix(ToReadOptions(ro), num_keys, targets, results, &out,
                        &CopySeekPrefixEntry);
    for (size_t i = 0; i < num_keys; i++) {
      // A found entry's status was set when it was copied.
      if (!results[i].ok()) {
        statuses[i] = static_cast<int32_t>(results[i].code());
      }
    }
    return Ok();
  });
}

const shale_snapshot_t* shale_snapshot_new(shale_db_t* db) {
  try {
    return new shale_snapshot_t{db->rep->GetSnapshot()};
  } catch (...) {
    return nullptr;
  }
}

void shale_snapshot_release(shale_db_t* db, const shale_snapshot_t* snap) {
  if (snap == nullptr) return;
  db->rep->ReleaseSnapshot(snap->rep);
  delete snap;
}

uint64_t shale_snapshot_sequence(const shale_snapshot_t* snap) {
  return snap->rep->sequence();
}

shale_status_t shale_iter_new(shale_db_t* db, const shale_read_options_t* ro,
                              const uint8_t* lower, size_t lower_len,
                              const uint8_t* upper, size_t upper_len,
                              shale_iterator_t** it) {
  if (db == nullptr || ro == nullptr || it == nullptr) {
    return NullArgument("iter_new");
  }
  *it = nullptr;
  return Guard("iter_new", [&] {
    Slice lo(lower == nullptr ? "" : reinterpret_cast<const char*>(lower),
             lower == nullptr ? 0 : lower_len);
    Slice hi(upper == nullptr ? "" : reinterpret_cast<const char*>(upper),
             upper == nullptr ? 0 : upper_len);
    std::unique_ptr<DBIter> iter(db->rep->NewIterator(
        ToReadOptions(ro), lower ? &lo : nullptr, upper ? &hi : nullptr));
    *it = new shale_iterator_t{std::move(iter), db->rep.get(), {}, {}, false};
    return Ok();
  });
}

void shale_iter_free(shale_iterator_t* it) { delete it; }

void shale_iter_seek_to_first(shale_iterator_t* it) {
  it->has_last = false;
  it->rep->SeekToFirst();
}

void shale_iter_seek_to_last(shale_iterator_t* it) {
  it->has_last = false;
  it->rep->SeekToLast();
}

void shale_iter_seek(shale_iterator_t* it, const uint8_t* target, size_t len) {
  it->has_last = false;
  it->rep->Seek(Slice(
      target == nullptr ? "" : reinterpret_cast<const char*>(target), len));
}

void shale_iter_seek_for_prev(shale_iterator_t* it, const uint8_t* target,
                              size_t len) {
  it->has_last = false;
  it->rep->SeekForPrev(Slice(
      target == nullptr ? "" : reinterpret_cast<const char*>(target), len));
}

shale_status_t shale_iter_set_version_floor(shale_iterator_t* it,
                                            const uint8_t* floor,
                                            size_t floor_len) {
  if (it == nullptr || (floor == nullptr && floor_len > 0)) {
    return NullArgument("iter_set_version_floor");
  }
  if (floor_len > 0 && !it->db->options().split_version_suffix) {
    return Error(SHALE_NOT_SUPPORTED,
                 "iter_set_version_floor: the database was not opened with "
                 "split_version_suffix");
  }
  it->version_floor.assign(reinterpret_cast<const char*>(floor), floor_len);
  it->has_last = false;
  return Ok();
}

namespace {

// Whether a forward batch with a version floor steps over key: a version
// newer than the floor, or an older version of the key whose visible
// version was emitted last. Sets *user to key's unversioned part (key
// itself for a key that is not versioned).
bool SkipVersion(const shale_iterator_t* it, const Slice& key, Slice* user) {
  const shale::Options& o = it->db->options();
  *user = StripVersionSuffix(key, o.versioned_key_prefix);
  if (user->size() == key.size()) return false;  // not a versioned key
  if (it->has_last && *user == Slice(it->last_key)) return true;
  const Slice suffix(key.data() + user->size(), key.size() - user->size());
  return suffix.compare(Slice(it->version_floor)) < 0;
}

// Versions stepped over one by one before a seek is worth its cost.
constexpr int kNextsBeforeSeek = 4;

// Seeks past versions of user that the floor rules out: to the first
// version at or above the floor if the current entry is newer, else (an
// older version of the key last emitted) past every version of user,
// which relies on unversioned parts being prefix-free (engine.h). Returns
// false, having not moved, when there is nowhere better to seek.
bool StepOverVersions(shale_iterator_t* it, const Slice& user) {
  DBIter* iter = it->rep.get();
  std::string target(user.data(), user.size());
  if (!(it->has_last && user == Slice(it->last_key))) {
    target.append(it->version_floor);
    iter->Seek(target);
    return true;
  }
  // The smallest key above every key that starts with user.
  while (!target.empty() && static_cast<uint8_t>(target.back()) == 0xff) {
    target.pop_back();
  }
  if (target.empty()) return false;
  target.back() = static_cast<char>(static_cast<uint8_t>(target.back()) + 1);
  iter->Seek(target);
  return true;
}

}  // namespace

shale_status_t shale_iter_next_batch(shale_iterator_t* it, uint32_t flags,
                                     size_t max_entries, uint8_t* buf,
                                     size_t buf_cap, size_t* num_entries,
                                     size_t* bytes_used, uint8_t* valid) {
  if (it == nullptr || num_entries == nullptr || bytes_used == nullptr ||
      valid == nullptr || (buf == nullptr && buf_cap > 0)) {
    return NullArgument("iter_next_batch");
  }
  DBIter* iter = it->rep.get();
  const bool reverse = (flags & SHALE_ITER_REVERSE) != 0;
  const bool keys_only = (flags & SHALE_ITER_KEYS_ONLY) != 0;
  const bool versions = !it->version_floor.empty();
  if (versions && reverse) {
    return Error(SHALE_INVALID_ARGUMENT,
                 "iter_next_batch: an iterator with a version floor reads "
                 "forward only");
  }
  size_t used = 0;
  size_t count = 0;
  int skipped_in_key = 0;
  *num_entries = 0;
  *bytes_used = 0;
  while (count < max_entries && iter->Valid()) {
    const Slice k = iter->key();
    Slice user;
    if (versions && SkipVersion(it, k, &user)) {
      // Step over a few versions one by one; past that, seek over the
      // rest of the key's history (StepOverVersions).
      if (++skipped_in_key < kNextsBeforeSeek || !StepOverVersions(it, user)) {
        iter->Next();
      }
      continue;
    }
    skipped_in_key = 0;
    const Slice v = keys_only ? Slice() : iter->value();
    const size_t need = 8 + k.size() + v.size();
    if (need > buf_cap - used) {
      if (count == 0) {
        *bytes_used = need;
        *valid = 1;
        return Error(SHALE_BUFFER_TOO_SMALL,
                     "iter_next_batch: the next entry needs " +
                         std::to_string(need) + " bytes, the buffer has " +
                         std::to_string(buf_cap));
      }
      break;
    }
    uint8_t* p = buf + used;
    shale::EncodeFixed32(reinterpret_cast<char*>(p),
                         static_cast<uint32_t>(k.size()));
    shale::EncodeFixed32(reinterpret_cast<char*>(p) + 4,
                         static_cast<uint32_t>(v.size()));
    memcpy(p + 8, k.data(), k.size());
    if (!v.empty()) memcpy(p + 8 + k.size(), v.data(), v.size());
    used += need;
    count++;
    if (versions && user.size() != k.size()) {
      // Emitted: step over this key's older versions, inside the blocks
      // without decoding them (unversioned parts are prefix-free, so the
      // keys that start with user are its versions).
      it->last_key.assign(user.data(), user.size());
      it->has_last = true;
      iter->NextPrefix(Slice(it->last_key));
      continue;
    }
    if (reverse) {
      iter->Prev();
    } else {
      iter->Next();
    }
  }
  *num_entries = count;
  *bytes_used = used;
  *valid = iter->Valid() ? 1 : 0;
  if (count > 0) {
    shale::Statistics* st = it->db->statistics();
    st->Record(shale::kKeysRead, count);
    st->Record(shale::kBytesRead, used - 8 * count);
  }
  if (iter->Valid()) return Ok();
  return Guard("iter_next_batch", [&] { return ToC(iter->status()); });
}

shale_status_t shale_flush(shale_db_t* db, uint8_t wait) {
  if (db == nullptr) return NullArgument("flush");
  return Guard("flush", [&] { return ToC(db->rep->Flush(wait != 0)); });
}

shale_status_t shale_compact_range(shale_db_t* db, const uint8_t* begin,
                                   size_t begin_len, const uint8_t* end,
                                   size_t end_len) {
  if (db == nullptr) return NullArgument("compact_range");
  return Guard("compact_range", [&] {
    Slice b(begin == nullptr ? "" : reinterpret_cast<const char*>(begin),
            begin == nullptr ? 0 : begin_len);
    Slice e(end == nullptr ? "" : reinterpret_cast<const char*>(end),
            end == nullptr ? 0 : end_len);
    return ToC(db->rep->CompactRange(begin ? &b : nullptr, end ? &e : nullptr));
  });
}

shale_status_t shale_wait_for_compaction(shale_db_t* db) {
  if (db == nullptr) return NullArgument("wait_for_compaction");
  return Guard("wait_for_compaction",
               [&] { return ToC(db->rep->WaitForCompaction()); });
}

shale_status_t shale_get_stats(shale_db_t* db, shale_stats_t* out) {
  if (db == nullptr || out == nullptr) return NullArgument("get_stats");
  return Guard("get_stats", [&] {
    shale::DBStats st;
    db->rep->GetStats(&st);
    memset(out, 0, sizeof(*out));
    out->user_bytes_written = st.user_bytes_written;
    out->user_keys_written = st.user_keys_written;
    out->wal_bytes_written = st.wal_bytes_written;
    out->wal_syncs = st.wal_syncs;
    out->flush_bytes_written = st.flush_bytes_written;
    out->compaction_bytes_written = st.compaction_bytes_written;
    out->compaction_bytes_read = st.compaction_bytes_read;
    out->bytes_read = st.bytes_read;
    out->keys_read = st.keys_read;
    out->stall_micros = st.stall_micros;
    out->block_cache_hits = st.block_cache_hits;
    out->block_cache_misses = st.block_cache_misses;
    out->block_cache_usage = st.block_cache_usage;
    out->block_cache_capacity = st.block_cache_capacity;
    out->bloom_filter_checked = st.bloom_filter_checked;
    out->bloom_filter_useful = st.bloom_filter_useful;
    out->memtable_bytes = st.memtable_bytes;
    out->num_immutable_memtables = st.num_immutable_memtables;
    out->flush_count = st.flush_count;
    out->compaction_count = st.compaction_count;
    out->running_flushes = st.running_flushes;
    out->running_compactions = st.running_compactions;
    out->pending_compaction_bytes = st.pending_compaction_bytes;
    out->last_sequence = st.last_sequence;
    out->num_snapshots = st.num_snapshots;
    out->live_sst_bytes = st.live_sst_bytes;
    out->wal_file_bytes = st.wal_file_bytes;
    out->background_error = st.background_error;
    out->num_levels = st.num_levels;
    for (int i = 0; i < SHALE_MAX_LEVELS && i < shale::kMaxLevels; i++) {
      out->level_files[i] = st.level_files[i];
      out->level_bytes[i] = st.level_bytes[i];
    }
    return Ok();
  });
}

char* shale_get_property(shale_db_t* db, const char* name) {
  if (db == nullptr || name == nullptr) return nullptr;
  try {
    std::string value;
    if (!db->rep->GetProperty(name, &value)) return nullptr;
    return CopyString(value);
  } catch (...) {
    return nullptr;
  }
}

shale_status_t shale_approximate_size(shale_db_t* db, const uint8_t* begin,
                                      size_t begin_len, const uint8_t* end,
                                      size_t end_len, uint64_t* bytes,
                                      uint64_t* keys) {
  if (db == nullptr || bytes == nullptr || keys == nullptr ||
      (begin == nullptr && begin_len > 0) || (end == nullptr && end_len > 0)) {
    return NullArgument("approximate_size");
  }
  return Guard("approximate_size", [&] {
    // A NULL end is unbounded; an empty non-NULL end is an empty span.
    const Slice end_slice(
        end == nullptr ? "" : reinterpret_cast<const char*>(end), end_len);
    return ToC(db->rep->ApproximateSize(
        Slice(begin == nullptr ? "" : reinterpret_cast<const char*>(begin),
              begin_len),
        end == nullptr ? nullptr : &end_slice, bytes, keys));
  });
}

shale_status_t shale_sst_writer_open(const shale_options_t* opts,
                                     const char* path, shale_sst_writer_t** w) {
  if (opts == nullptr || path == nullptr || w == nullptr) {
    return NullArgument("sst_writer_open");
  }
  *w = nullptr;
  return Guard("sst_writer_open", [&] {
    shale::Options options;
    Status s = ToOptions(opts, &options);
    std::unique_ptr<shale::SstFileWriter> writer;
    if (s.ok()) s = shale::SstFileWriter::Open(options, path, &writer);
    if (!s.ok()) return ToC(s);
    *w = new shale_sst_writer_t{std::move(writer)};
    return Ok();
  });
}

shale_status_t shale_sst_writer_put(shale_sst_writer_t* w, const uint8_t* key,
                                    size_t key_len, const uint8_t* value,
                                    size_t value_len) {
  if (w == nullptr || (key == nullptr && key_len > 0) ||
      (value == nullptr && value_len > 0)) {
    return NullArgument("sst_writer_put");
  }
  return Guard("sst_writer_put", [&] {
    return ToC(w->rep->Put(
        Slice(key == nullptr ? "" : reinterpret_cast<const char*>(key),
              key_len),
        Slice(value == nullptr ? "" : reinterpret_cast<const char*>(value),
              value_len)));
  });
}

shale_status_t shale_sst_writer_add_entries(shale_sst_writer_t* w,
                                            const uint8_t* buf, size_t len) {
  if (w == nullptr || (buf == nullptr && len > 0)) {
    return NullArgument("sst_writer_add_entries");
  }
  return Guard("sst_writer_add_entries", [&] {
    // entry := key_len: fixed32, value_len: fixed32, key, value
    const char* p = reinterpret_cast<const char*>(buf);
    size_t left = len;
    size_t index = 0;
    while (left > 0) {
      if (left < 8) {
        return Error(SHALE_INVALID_ARGUMENT, "sst_writer_add_entries: entry " +
                                                 std::to_string(index) +
                                                 " has a truncated header");
      }
      const uint32_t kl = shale::DecodeFixed32(p);
      const uint32_t vl = shale::DecodeFixed32(p + 4);
      if (static_cast<uint64_t>(kl) + vl > left - 8) {
        return Error(SHALE_INVALID_ARGUMENT,
                     "sst_writer_add_entries: entry " + std::to_string(index) +
                         " runs past the end of the buffer");
      }
      Status s = w->rep->Put(Slice(p + 8, kl), Slice(p + 8 + kl, vl));
      if (!s.ok()) return ToC(s);
      p += 8 + kl + vl;
      left -= 8 + static_cast<size_t>(kl) + vl;
      index++;
    }
    return Ok();
  });
}

shale_status_t shale_sst_writer_delete_range(shale_sst_writer_t* w,
                                             const uint8_t* begin,
                                             size_t begin_len,
                                             const uint8_t* end,
                                             size_t end_len) {
  if (w == nullptr || (begin == nullptr && begin_len > 0) ||
      (end == nullptr && end_len > 0)) {
    return NullArgument("sst_writer_delete_range");
  }
  return Guard("sst_writer_delete_range", [&] {
    return ToC(w->rep->DeleteRange(
        Slice(begin == nullptr ? "" : reinterpret_cast<const char*>(begin),
              begin_len),
        Slice(end == nullptr ? "" : reinterpret_cast<const char*>(end),
              end_len)));
  });
}

shale_status_t shale_sst_writer_finish(shale_sst_writer_t* w,
                                       uint64_t* file_size) {
  if (w == nullptr || file_size == nullptr) {
    return NullArgument("sst_writer_finish");
  }
  return Guard("sst_writer_finish",
               [&] { return ToC(w->rep->Finish(file_size)); });
}

void shale_sst_writer_free(shale_sst_writer_t* w) { delete w; }

shale_status_t shale_ingest(shale_db_t* db, size_t num_files,
                            const char* const* paths) {
  if (db == nullptr || (paths == nullptr && num_files > 0)) {
    return NullArgument("ingest");
  }
  return Guard("ingest", [&] {
    std::vector<std::string> files;
    for (size_t i = 0; i < num_files; i++) {
      if (paths[i] == nullptr) return NullArgument("ingest");
      files.emplace_back(paths[i]);
    }
    return ToC(db->rep->Ingest(files));
  });
}

shale_status_t shale_checkpoint(shale_db_t* db, const char* dir) {
  if (db == nullptr || dir == nullptr) return NullArgument("checkpoint");
  return Guard("checkpoint", [&] { return ToC(db->rep->Checkpoint(dir)); });
}

}  // extern "C"
