#include "util/fault_injection_env.h"

namespace shale {

namespace {

// A writable file whose writes consult the Env's fault first.
class FaultyWritableFile final : public WritableFile {
 public:
  FaultyWritableFile(FaultInjectionEnv* env, std::unique_ptr<WritableFile> base)
      : env_(env), base_(std::move(base)) {}

  Status Append(const Slice& data) override {
    Status s = env_->CheckFault(base_->Name());
    return s.ok() ? base_->Append(data) : s;
  }
  Status Flush() override {
    Status s = env_->CheckFault(base_->Name());
    return s.ok() ? base_->Flush() : s;
  }
  Status Sync() override {
    Status s = env_->CheckFault(base_->Name());
    return s.ok() ? base_->Sync() : s;
  }
  Status SyncData() override {
    Status s = env_->CheckFault(base_->Name());
    return s.ok() ? base_->SyncData() : s;
  }
  Status Close() override { return base_->Close(); }
  uint64_t Size() const override { return base_->Size(); }
  const std::string& Name() const override { return base_->Name(); }

 private:
  FaultInjectionEnv* const env_;
  std::unique_ptr<WritableFile> base_;
};

}  // namespace

void FaultInjectionEnv::SetWriteFault(const Status& error,
                                      const std::string& name_filter) {
  MutexLock l(&mu_);
  error_ = error;
  filter_ = name_filter;
  faulty_.store(true, std::memory_order_release);
}

void FaultInjectionEnv::ClearFault() {
  faulty_.store(false, std::memory_order_release);
}

Status FaultInjectionEnv::CheckFault(const std::string& fname) {
  if (!faulty_.load(std::memory_order_acquire)) return Status::OK();
  MutexLock l(&mu_);
  if (!filter_.empty() && fname.find(filter_) == std::string::npos) {
    return Status::OK();
  }
  faults_.fetch_add(1, std::memory_order_relaxed);
  return Status(error_);
}

Status FaultInjectionEnv::NewWritableFile(
    const std::string& fname, std::unique_ptr<WritableFile>* result) {
  Status s = CheckFault(fname);
  if (!s.ok()) return s;
  std::unique_ptr<WritableFile> base;
  s = base_->NewWritableFile(fname, &base);
  if (s.ok()) result->reset(new FaultyWritableFile(this, std::move(base)));
  return s;
}

Status FaultInjectionEnv::NewAppendableFile(
    const std::string& fname, std::unique_ptr<WritableFile>* result) {
  Status s = CheckFault(fname);
  if (!s.ok()) return s;
  std::unique_ptr<WritableFile> base;
  s = base_->NewAppendableFile(fname, &base);
  if (s.ok()) result->reset(new FaultyWritableFile(this, std::move(base)));
  return s;
}

}  // namespace shale
