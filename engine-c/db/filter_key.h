// InternalFilterPolicy: a filter policy for tables of internal keys that
// builds and probes filters over user keys (the key without its 8-byte
// trailer), so that a lookup at any sequence number matches every version
// of its key. The user policy may narrow the key further (its own
// FilterKey, e.g. dropping a version suffix: table/version_suffix_filter.h).
//
// Thread safety: immutable; may be shared.

#ifndef SHALE_DB_FILTER_KEY_H_
#define SHALE_DB_FILTER_KEY_H_

#include <memory>
#include <string>

#include "db/dbformat.h"
#include "db/options.h"
#include "table/filter_policy.h"

namespace shale {

class InternalFilterPolicy final : public FilterPolicy {
 public:
  // Takes ownership of user_policy.
  explicit InternalFilterPolicy(const FilterPolicy* user_policy)
      : user_policy_(user_policy) {}

  // The user policy's name: the filter bits are exactly its encoding.
  const char* Name() const override { return user_policy_->Name(); }
  void CreateFilter(const Slice* keys, int n, std::string* dst) const override {
    user_policy_->CreateFilter(keys, n, dst);
  }
  bool KeyMayMatch(const Slice& key, const Slice& filter) const override {
    return user_policy_->KeyMayMatch(key, filter);
  }
  void KeysMayMatch(const Slice* keys, int n, const Slice& filter,
                    bool* may_match) const override {
    user_policy_->KeysMayMatch(keys, n, filter, may_match);
  }
  bool PrepareProbe(const Slice& key, uint64_t* probe) const override {
    return user_policy_->PrepareProbe(key, probe);
  }
  bool ProbeMayMatch(uint64_t probe, const Slice& filter) const override {
    return user_policy_->ProbeMayMatch(probe, filter);
  }
  void ProbesMayMatch(const uint64_t* probes, int n, const Slice& filter,
                      bool* may_match) const override {
    user_policy_->ProbesMayMatch(probes, n, filter, may_match);
  }
  bool ProbesCacheLineBloom() const override {
    return user_policy_->ProbesCacheLineBloom();
  }
  Slice FilterKey(const Slice& table_key) const override {
    return user_policy_->FilterKey(
        table_key.size() >= 8 ? ExtractUserKey(table_key) : table_key);
  }

 private:
  std::unique_ptr<const FilterPolicy> user_policy_;
};

// The filter policy for tables of a database opened with options: nullptr
// when options disable filters, else a Bloom filter over user keys, without
// their version suffix when options.split_version_suffix is set.
std::unique_ptr<const FilterPolicy> NewInternalFilterPolicy(
    const Options& options);

}  // namespace shale

#endif  // SHALE_DB_FILTER_KEY_H_
