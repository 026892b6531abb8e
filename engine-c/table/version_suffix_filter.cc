#include "table/version_suffix_filter.h"

#include <memory>

namespace shale {

Slice StripVersionSuffix(const Slice& key, const Slice& prefix) {
  if (!key.starts_with(prefix) || key.size() == prefix.size()) return key;
  const size_t suffix = static_cast<uint8_t>(key[key.size() - 1]);
  if (suffix == 0 || suffix > key.size() - prefix.size()) return key;
  return Slice(key.data(), key.size() - suffix);
}

namespace {

class VersionSuffixFilterPolicy final : public FilterPolicy {
 public:
  VersionSuffixFilterPolicy(const FilterPolicy* inner, const Slice& prefix)
      : inner_(inner), prefix_(prefix.ToString()) {
    static const char kHex[] = "0123456789abcdef";
    name_ = std::string(inner_->Name()) + "+vsuffix(";
    for (unsigned char c : prefix_) {
      name_.push_back(kHex[c >> 4]);
      name_.push_back(kHex[c & 0xf]);
    }
    name_.push_back(')');
  }

  const char* Name() const override { return name_.c_str(); }
  void CreateFilter(const Slice* keys, int n, std::string* dst) const override {
    inner_->CreateFilter(keys, n, dst);
  }
  bool KeyMayMatch(const Slice& key, const Slice& filter) const override {
    return inner_->KeyMayMatch(key, filter);
  }
  void KeysMayMatch(const Slice* keys, int n, const Slice& filter,
                    bool* may_match) const override {
    inner_->KeysMayMatch(keys, n, filter, may_match);
  }
  bool PrepareProbe(const Slice& key, uint64_t* probe) const override {
    return inner_->PrepareProbe(key, probe);
  }
  bool ProbeMayMatch(uint64_t probe, const Slice& filter) const override {
    return inner_->ProbeMayMatch(probe, filter);
  }
  void ProbesMayMatch(const uint64_t* probes, int n, const Slice& filter,
                      bool* may_match) const override {
    inner_->ProbesMayMatch(probes, n, filter, may_match);
  }
  bool ProbesCacheLineBloom() const override {
    return inner_->ProbesCacheLineBloom();
  }
  Slice FilterKey(const Slice& key) const override {
    return StripVersionSuffix(inner_->FilterKey(key), prefix_);
  }

 private:
  std::unique_ptr<const FilterPolicy> inner_;
  std::string prefix_;
  std::string name_;
};

}  // namespace

const FilterPolicy* NewVersionSuffixFilterPolicy(const FilterPolicy* inner,
                                                 const Slice& prefix) {
  return new VersionSuffixFilterPolicy(inner, prefix);
}

}  // namespace shale
