#include "tools/stress/expected_state.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shale::stress {

namespace {
constexpr char kMagic[8] = {'S', 'H', 'S', 'T', 'R', 'E', 'S', '2'};
constexpr size_t kHeaderBytes = 4096;
static_assert(sizeof(Header) <= kHeaderBytes);
}  // namespace

const char* SyncModeName(SyncMode m) {
  switch (m) {
    case SyncMode::kSync:
      return "sync";
    case SyncMode::kNoSync:
      return "nosync";
    case SyncMode::kNoWal:
      return "nowal";
  }
  return "?";
}

ExpectedState::~ExpectedState() {
  if (map_ != nullptr) munmap(map_, map_size_);
  if (fd_ >= 0) close(fd_);
}

Status ExpectedState::Open(const std::string& path, uint32_t num_keys,
                           SyncMode mode, bool* created) {
  fd_ = open(path.c_str(), O_RDWR | O_CREAT, 0644);
  if (fd_ < 0) return Status::FromErrno("expected state " + path, errno);
  struct stat st;
  if (fstat(fd_, &st) != 0) {
    return Status::FromErrno("expected state " + path, errno);
  }
  map_size_ = kHeaderBytes + sizeof(Slot) * static_cast<size_t>(num_keys);
  *created = st.st_size == 0;
  if (!*created && static_cast<size_t>(st.st_size) != map_size_) {
    return Status::InvalidArgument(
        "expected state " + path + ": size " + std::to_string(st.st_size) +
        " does not match --keys=" + std::to_string(num_keys));
  }
  if (*created && ftruncate(fd_, map_size_) != 0) {
    return Status::FromErrno("expected state " + path, errno);
  }
  map_ = mmap(nullptr, map_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    return Status::FromErrno("mmap expected state " + path, errno);
  }
  header_ = static_cast<Header*>(map_);
  slots_ = reinterpret_cast<Slot*>(static_cast<char*>(map_) + kHeaderBytes);
  num_keys_ = num_keys;
  if (*created) {
    memcpy(header_->magic, kMagic, sizeof(kMagic));
    header_->num_keys = num_keys;
    header_->mode = static_cast<uint32_t>(mode);
    return Status::OK();
  }
  if (memcmp(header_->magic, kMagic, sizeof(kMagic)) != 0) {
    return Status::Corruption("expected state " + path, "bad magic");
  }
  if (header_->num_keys != num_keys ||
      header_->mode != static_cast<uint32_t>(mode)) {
    return Status::InvalidArgument(
        "expected state " + path +
        " was made for --keys=" + std::to_string(header_->num_keys) +
        " --mode=" + SyncModeName(static_cast<SyncMode>(header_->mode)));
  }
  return Status::OK();
}

uint32_t ExpectedState::NewVersion(uint32_t key) {
  Slot& s = slots_[key];
  const uint32_t v = Load(s.max_issued) + 1;
  Store(s.max_issued, v);
  return v;
}

void ExpectedState::SetPending(uint32_t key, uint32_t version) {
  Store(slots_[key].pending, kPendingFlag | version);
}

void ExpectedState::Commit(uint32_t key) {
  Slot& s = slots_[key];
  Store(s.committed, Load(s.pending) & ~kPendingFlag);
  Store(s.pending, 0);
}

OpLog::~OpLog() {
  if (fd_ >= 0) close(fd_);
}

Status OpLog::Open(const std::string& path) {
  path_ = path;
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_APPEND, 0644);
  if (fd_ < 0) return Status::FromErrno("op log " + path, errno);
  return Status::OK();
}

Status OpLog::Append(const OpEntry* entries, size_t n) {
  const char* p = reinterpret_cast<const char*>(entries);
  size_t left = n * sizeof(OpEntry);
  while (left > 0) {
    ssize_t w = write(fd_, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("op log " + path_, errno);
    }
    p += w;
    left -= w;
  }
  return Status::OK();
}

Status OpLog::ReadAll(std::string* data) {
  data->clear();
  char buf[1 << 16];
  off_t off = 0;
  for (;;) {
    ssize_t r = pread(fd_, buf, sizeof(buf), off);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("op log " + path_, errno);
    }
    if (r == 0) break;
    data->append(buf, r);
    off += r;
  }
  data->resize(data->size() - data->size() % sizeof(OpEntry));
  return Status::OK();
}

Status OpLog::Truncate() {
  if (ftruncate(fd_, 0) != 0)
    return Status::FromErrno("op log " + path_, errno);
  return Status::OK();
}

}  // namespace shale::stress
