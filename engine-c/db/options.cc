#include "db/options.h"

#include <string>

#include "table/version_suffix_filter.h"

namespace shale {

namespace {

Status Bad(const std::string& what) {
  return Status::InvalidArgument("options: " + what);
}

}  // namespace

Status Options::Validate() const {
  if (write_buffer_size < (64 << 10)) {
    return Bad("write_buffer_size " + std::to_string(write_buffer_size) +
               " is below the minimum of 65536");
  }
  if (max_write_buffer_number < 2) {
    return Bad(
        "max_write_buffer_number must be at least 2 (one active, one "
        "being flushed), got " +
        std::to_string(max_write_buffer_number));
  }
  if (block_size < 256 || block_size > (256u << 20)) {
    return Bad("block_size " + std::to_string(block_size) +
               " is outside [256, 256 MiB]");
  }
  if (block_restart_interval < 1) {
    return Bad("block_restart_interval must be at least 1");
  }
  if (bloom_bits_per_key < 0 || bloom_bits_per_key > 100) {
    return Bad("bloom_bits_per_key " + std::to_string(bloom_bits_per_key) +
               " is outside [0, 100]");
  }
  if (versioned_key_prefix.size() > kMaxVersionedKeyPrefix) {
    return Bad("versioned_key_prefix is " +
               std::to_string(versioned_key_prefix.size()) +
               " bytes, more than the maximum of " +
               std::to_string(kMaxVersionedKeyPrefix));
  }
  if (!split_version_suffix && !versioned_key_prefix.empty()) {
    return Bad("versioned_key_prefix is set but split_version_suffix is not");
  }
  if (compression != kNoCompression && compression != kSnappyCompression) {
    return Bad("unknown compression " +
               std::to_string(static_cast<int>(compression)));
  }
  if (num_levels < 2 || num_levels > kMaxLevels) {
    return Bad("num_levels " + std::to_string(num_levels) + " is outside [2, " +
               std::to_string(kMaxLevels) + "]");
  }
  if (target_file_size_base < (64 << 10)) {
    return Bad("target_file_size_base " +
               std::to_string(target_file_size_base) +
               " is below the minimum of 65536");
  }
  if (max_bytes_for_level_base < (64 << 10)) {
    return Bad("max_bytes_for_level_base " +
               std::to_string(max_bytes_for_level_base) +
               " is below the minimum of 65536");
  }
  if (!(max_bytes_for_level_multiplier >= 1.0)) {
    return Bad("max_bytes_for_level_multiplier must be at least 1");
  }
  if (level0_file_num_compaction_trigger < 1) {
    return Bad("level0_file_num_compaction_trigger must be at least 1");
  }
  if (level0_slowdown_writes_trigger < level0_file_num_compaction_trigger) {
    return Bad(
        "level0_slowdown_writes_trigger must be at least "
        "level0_file_num_compaction_trigger");
  }
  if (level0_stop_writes_trigger < level0_slowdown_writes_trigger) {
    return Bad(
        "level0_stop_writes_trigger must be at least "
        "level0_slowdown_writes_trigger");
  }
  if (max_background_jobs < 1 || max_background_jobs > 64) {
    return Bad("max_background_jobs " + std::to_string(max_background_jobs) +
               " is outside [1, 64]");
  }
  if (delayed_write_rate == 0) {
    return Bad("delayed_write_rate must be positive");
  }
  const int mode = static_cast<int>(wal_recovery_mode);
  if (mode < 0 || mode > 2) {
    return Bad("unknown wal_recovery_mode " + std::to_string(mode));
  }
  return Status::OK();
}

}  // namespace shale
