// The POSIX Env: pread/write/fdatasync files, flock'ed LOCK files.

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "util/env.h"

namespace shale {

namespace {

// User-space write buffer: small appends (WAL records) are gathered into one
// write(2).
constexpr size_t kWritableFileBufferSize = 64 * 1024;

Status PosixError(const std::string& context, int err) {
  return Status::FromErrno(context, err);
}

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(std::string fname, int fd)
      : fd_(fd), filename_(std::move(fname)) {}
  ~PosixSequentialFile() override { close(fd_); }

  Status Read(size_t n, Slice* result, char* scratch) override {
    while (true) {
      ssize_t r = ::read(fd_, scratch, n);
      if (r < 0) {
        if (errno == EINTR) continue;
        return PosixError(filename_, errno);
      }
      *result = Slice(scratch, r);
      return Status::OK();
    }
  }

  Status Skip(uint64_t n) override {
    if (lseek(fd_, n, SEEK_CUR) == static_cast<off_t>(-1)) {
      return PosixError(filename_, errno);
    }
    return Status::OK();
  }

 private:
  const int fd_;
  const std::string filename_;
};

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string fname, int fd)
      : fd_(fd), filename_(std::move(fname)) {}
  ~PosixRandomAccessFile() override { close(fd_); }

  Status Read(uint64_t offset, size_t n, Slice* result,
              char* scratch) const override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = pread(fd_, scratch + done, n - done, offset + done);
      if (r < 0) {
        if (errno == EINTR) continue;
        *result = Slice(scratch, 0);
        return PosixError(filename_, errno);
      }
      if (r == 0) break;  // end of file
      done += r;
    }
    *result = Slice(scratch, done);
    return Status::OK();
  }

 private:
  const int fd_;
  const std::string filename_;
};

class PosixMmapReadableFile final : public RandomAccessFile {
 public:
  PosixMmapReadableFile(std::string fname, char* base, size_t length)
      : base_(base), length_(length), filename_(std::move(fname)) {}
  ~PosixMmapReadableFile() override {
    if (length_ > 0) munmap(base_, length_);
  }

  Status Read(uint64_t offset, size_t n, Slice* result,
              char* scratch) const override {
    if (offset > length_) {
      *result = Slice();
      return Status::OK();
    }
    if (n > length_ - offset) n = length_ - offset;
    *result = Slice(base_ + offset, n);
    return Status::OK();
  }

 private:
  char* const base_;
  const size_t length_;
  const std::string filename_;
};

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string fname, int fd, uint64_t initial_size)
      : fd_(fd), size_(initial_size), filename_(std::move(fname)) {
    buf_.reserve(kWritableFileBufferSize);
  }
  ~PosixWritableFile() override {
    if (fd_ >= 0) Close();
  }

  Status Append(const Slice& data) override {
    if (fd_ < 0) return Status::IOError(filename_, "append after close");
    size_ += data.size();
    const char* p = data.data();
    size_t n = data.size();
    // Fill the buffer first; write large appends straight through.
    size_t copy = std::min(n, kWritableFileBufferSize - buf_.size());
    buf_.append(p, copy);
    p += copy;
    n -= copy;
    if (n == 0) return Status::OK();
    Status s = FlushBuffer();
    if (!s.ok()) return s;
    if (n < kWritableFileBufferSize) {
      buf_.append(p, n);
      return Status::OK();
    }
    return WriteUnbuffered(p, n);
  }

  Status Flush() override {
    if (fd_ < 0) return Status::IOError(filename_, "flush after close");
    return FlushBuffer();
  }

  Status Sync() override {
    Status s = Flush();
    if (!s.ok()) return s;
    if (fdatasync(fd_) != 0)
      return PosixError(filename_ + ": fdatasync", errno);
    return Status::OK();
  }

  // Touches only fd_, which stays fixed until Close: safe beside Append.
  Status SyncData() override {
    if (fd_ < 0) return Status::IOError(filename_, "sync after close");
    if (fdatasync(fd_) != 0)
      return PosixError(filename_ + ": fdatasync", errno);
    return Status::OK();
  }

  Status Close() override {
    if (fd_ < 0) return Status::OK();
    Status s = FlushBuffer();
    if (::close(fd_) != 0 && s.ok()) s = PosixError(filename_, errno);
    fd_ = -1;
    return s;
  }

  uint64_t Size() const override { return size_; }
  const std::string& Name() const override { return filename_; }

 private:
  Status FlushBuffer() {
    Status s = WriteUnbuffered(buf_.data(), buf_.size());
    buf_.clear();
    return s;
  }

  Status WriteUnbuffered(const char* p, size_t n) {
    while (n > 0) {
      ssize_t r = ::write(fd_, p, n);
      if (r < 0) {
        if (errno == EINTR) continue;
        return PosixError(filename_, errno);
      }
      p += r;
      n -= r;
    }
    return Status::OK();
  }

  int fd_;
  uint64_t size_;
  std::string buf_;
  const std::string filename_;
};

class PosixFileLock final : public FileLock {
 public:
  PosixFileLock(int fd, std::string fname, std::set<std::string>* locked,
                std::mutex* mu)
      : fd_(fd), fname_(std::move(fname)), locked_(locked), mu_(mu) {}
  ~PosixFileLock() override {
    flock(fd_, LOCK_UN);
    close(fd_);
    std::lock_guard<std::mutex> l(*mu_);
    locked_->erase(fname_);
  }

 private:
  const int fd_;
  const std::string fname_;
  std::set<std::string>* const locked_;
  std::mutex* const mu_;
};

class PosixEnv final : public Env {
 public:
  Status NewSequentialFile(const std::string& fname,
                           std::unique_ptr<SequentialFile>* result) override {
    int fd = ::open(fname.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return PosixError(fname, errno);
    result->reset(new PosixSequentialFile(fname, fd));
    return Status::OK();
  }

  Status NewRandomAccessFile(const std::string& fname,
                             std::unique_ptr<RandomAccessFile>* result,
                             bool use_mmap) override {
    int fd = ::open(fname.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return PosixError(fname, errno);
    if (!use_mmap) {
      result->reset(new PosixRandomAccessFile(fname, fd));
      return Status::OK();
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
      int err = errno;
      close(fd);
      return PosixError(fname, err);
    }
    char* base = nullptr;
    if (st.st_size > 0) {
      void* m = mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
      if (m == MAP_FAILED) {
        int err = errno;
        close(fd);
        return PosixError(fname + ": mmap", err);
      }
      base = static_cast<char*>(m);
    }
    close(fd);  // the mapping keeps the file alive
    result->reset(new PosixMmapReadableFile(fname, base, st.st_size));
    return Status::OK();
  }

  Status NewWritableFile(const std::string& fname,
                         std::unique_ptr<WritableFile>* result) override {
    int fd =
        ::open(fname.c_str(), O_TRUNC | O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return PosixError(fname, errno);
    result->reset(new PosixWritableFile(fname, fd, 0));
    return Status::OK();
  }

  Status NewAppendableFile(const std::string& fname,
                           std::unique_ptr<WritableFile>* result) override {
    int fd =
        ::open(fname.c_str(), O_APPEND | O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return PosixError(fname, errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
      int err = errno;
      close(fd);
      return PosixError(fname, err);
    }
    result->reset(new PosixWritableFile(fname, fd, st.st_size));
    return Status::OK();
  }

  bool FileExists(const std::string& fname) override {
    return access(fname.c_str(), F_OK) == 0;
  }

  Status GetChildren(const std::string& dir,
                     std::vector<std::string>* result) override {
    result->clear();
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return PosixError(dir, errno);
    struct dirent* entry;
    while ((entry = readdir(d)) != nullptr) {
      if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
        continue;
      result->emplace_back(entry->d_name);
    }
    closedir(d);
    return Status::OK();
  }

  Status RemoveFile(const std::string& fname) override {
    if (unlink(fname.c_str()) != 0) return PosixError(fname, errno);
    return Status::OK();
  }

  Status CreateDir(const std::string& dirname) override {
    if (mkdir(dirname.c_str(), 0755) != 0) return PosixError(dirname, errno);
    return Status::OK();
  }

  Status RemoveDir(const std::string& dirname) override {
    if (rmdir(dirname.c_str()) != 0) return PosixError(dirname, errno);
    return Status::OK();
  }

  Status GetFileSize(const std::string& fname, uint64_t* size) override {
    struct stat st;
    if (stat(fname.c_str(), &st) != 0) {
      *size = 0;
      return PosixError(fname, errno);
    }
    *size = st.st_size;
    return Status::OK();
  }

  Status RenameFile(const std::string& src,
                    const std::string& target) override {
    if (rename(src.c_str(), target.c_str()) != 0) {
      return PosixError(src + " -> " + target, errno);
    }
    return Status::OK();
  }

  Status TruncateFile(const std::string& fname, uint64_t size) override {
    int fd = ::open(fname.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return PosixError(fname, errno);
    Status s;
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      s = PosixError(fname + ": truncate", errno);
    } else if (fdatasync(fd) != 0) {
      s = PosixError(fname + ": fdatasync", errno);
    }
    close(fd);
    return s;
  }

  Status LinkFile(const std::string& src, const std::string& target) override {
    if (link(src.c_str(), target.c_str()) != 0) {
      return PosixError(src + " -> " + target, errno);
    }
    return Status::OK();
  }

  Status SyncDir(const std::string& dirname) override {
    int fd = ::open(dirname.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return PosixError(dirname, errno);
    Status s;
    if (fsync(fd) != 0) s = PosixError(dirname + ": fsync", errno);
    close(fd);
    return s;
  }

  Status LockFile(const std::string& fname,
                  std::unique_ptr<FileLock>* lock) override {
    {
      // flock() does not stop a second open of the same file by this
      // process, so track our own locks too.
      std::lock_guard<std::mutex> l(locks_mu_);
      if (!locked_files_.insert(fname).second) {
        return Status::IOError(fname, "already held by this process");
      }
    }
    int fd = ::open(fname.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      if (fd >= 0) close(fd);
      std::lock_guard<std::mutex> l(locks_mu_);
      locked_files_.erase(fname);
      return PosixError(fname + ": lock (is another process using it?)", err);
    }
    lock->reset(new PosixFileLock(fd, fname, &locked_files_, &locks_mu_));
    return Status::OK();
  }

  uint64_t NowMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  void SleepForMicroseconds(int micros) override {
    std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }

 private:
  std::mutex locks_mu_;
  std::set<std::string> locked_files_;  // guarded by locks_mu_
};

}  // namespace

Env* Env::Default() {
  static PosixEnv* const kDefault = new PosixEnv;
  return kDefault;
}

Status WriteStringToFile(Env* env, const Slice& data, const std::string& fname,
                         bool sync) {
  std::unique_ptr<WritableFile> file;
  Status s = env->NewWritableFile(fname, &file);
  if (!s.ok()) return s;
  s = file->Append(data);
  if (s.ok() && sync) s = file->Sync();
  if (s.ok()) s = file->Close();
  if (!s.ok()) env->RemoveFile(fname);
  return s;
}

Status ReadFileToString(Env* env, const std::string& fname, std::string* data) {
  data->clear();
  std::unique_ptr<SequentialFile> file;
  Status s = env->NewSequentialFile(fname, &file);
  if (!s.ok()) return s;
  static const int kBufferSize = 8192;
  std::unique_ptr<char[]> space(new char[kBufferSize]);
  while (true) {
    Slice fragment;
    s = file->Read(kBufferSize, &fragment, space.get());
    if (!s.ok()) break;
    data->append(fragment.data(), fragment.size());
    if (fragment.empty()) break;
  }
  return s;
}

}  // namespace shale
