#include "db/filter_key.h"

#include "table/version_suffix_filter.h"

namespace shale {

std::unique_ptr<const FilterPolicy> NewInternalFilterPolicy(
    const Options& options) {
  if (options.bloom_bits_per_key <= 0) return nullptr;
  const FilterPolicy* user = NewBloomFilterPolicy(options.bloom_bits_per_key);
  if (options.split_version_suffix) {
    user = NewVersionSuffixFilterPolicy(user, options.versioned_key_prefix);
  }
  return std::make_unique<InternalFilterPolicy>(user);
}

}  // namespace shale
