// Env: the engine's window onto the operating system (files, directories,
// locks, the clock).
//
// Everything the engine does to the file system goes through an Env, so that
// tests can substitute one that fails on demand or forgets unsynced data
// (util/fault_injection_env.h, issue-4 work). Env::Default() is the POSIX
// implementation.
//
// Thread safety: Env methods may be called concurrently. A RandomAccessFile
// may be read by many threads at once; SequentialFile and WritableFile are
// used by one thread at a time.

#ifndef SHALE_UTIL_ENV_H_
#define SHALE_UTIL_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/slice.h"
#include "util/status.h"

namespace shale {

// A file read from start to end (WAL and MANIFEST replay).
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;

  // Reads up to n bytes. *result points either into scratch (which must have
  // room for n bytes) or into memory the file owns. A short read without an
  // error means end of file.
  virtual Status Read(size_t n, Slice* result, char* scratch) = 0;

  // Skips n bytes.
  virtual Status Skip(uint64_t n) = 0;
};

// A file read at arbitrary offsets (SSTs). Safe for concurrent use.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;

  // Reads up to n bytes at offset. *result points either into scratch
  // (which must have room for n bytes) or into memory the file owns (mmap)
  // that stays valid while the file is open. Reading past the end yields a
  // short result, not an error.
  virtual Status Read(uint64_t offset, size_t n, Slice* result,
                      char* scratch) const = 0;
};

// A file written sequentially (WAL, SSTs, MANIFEST). Appends are buffered in
// user space; Flush hands them to the OS; Sync makes them durable.
class WritableFile {
 public:
  virtual ~WritableFile() = default;

  virtual Status Append(const Slice& data) = 0;
  virtual Status Flush() = 0;
  // Flushes, then fdatasync()s the file.
  virtual Status Sync() = 0;
  // fdatasync()s what has already reached the OS (by Flush, or by an Append
  // that wrote through) and leaves the user-space buffer alone, so another
  // thread may Append or Flush meanwhile: everything flushed before the
  // call is durable when it returns. The file must stay open until it
  // returns. Files that cannot do this return NotSupported.
  virtual Status SyncData() { return Status::NotSupported(Name(), "SyncData"); }
  // Flushes and closes. Further calls fail.
  virtual Status Close() = 0;
  // Bytes appended so far (buffered or not).
  virtual uint64_t Size() const = 0;
  // The file's name, for error messages.
  virtual const std::string& Name() const = 0;
};

// A held lock on a file (the DB's LOCK file).
class FileLock {
 public:
  virtual ~FileLock() = default;
};

class Env {
 public:
  virtual ~Env() = default;

  // The POSIX Env; a process-lifetime singleton.
  static Env* Default();

  virtual Status NewSequentialFile(const std::string& fname,
                                   std::unique_ptr<SequentialFile>* result) = 0;
  // use_mmap: map the file instead of pread'ing it.
  virtual Status NewRandomAccessFile(const std::string& fname,
                                     std::unique_ptr<RandomAccessFile>* result,
                                     bool use_mmap = false) = 0;
  // Creates (or truncates) fname.
  virtual Status NewWritableFile(const std::string& fname,
                                 std::unique_ptr<WritableFile>* result) = 0;
  // Opens fname for appending, creating it if needed.
  virtual Status NewAppendableFile(const std::string& fname,
                                   std::unique_ptr<WritableFile>* result) = 0;

  virtual bool FileExists(const std::string& fname) = 0;
  // Names (not paths) of the entries of dir, without "." and "..".
  virtual Status GetChildren(const std::string& dir,
                             std::vector<std::string>* result) = 0;
  virtual Status RemoveFile(const std::string& fname) = 0;
  virtual Status CreateDir(const std::string& dirname) = 0;
  virtual Status RemoveDir(const std::string& dirname) = 0;
  virtual Status GetFileSize(const std::string& fname, uint64_t* size) = 0;
  // Atomically replaces target with src (rename(2)).
  virtual Status RenameFile(const std::string& src,
                            const std::string& target) = 0;
  // Cuts fname to size bytes (ftruncate(2)) and syncs it. Used to drop a
  // damaged WAL tail once recovery has decided to discard it.
  virtual Status TruncateFile(const std::string& fname, uint64_t size) = 0;
  // Creates target as a hard link to src.
  virtual Status LinkFile(const std::string& src,
                          const std::string& target) = 0;
  // fsyncs a directory so that entries created, renamed or removed in it
  // are durable.
  virtual Status SyncDir(const std::string& dirname) = 0;

  // Locks fname (creating it) so that a second process cannot open the same
  // database. Fails if another process holds the lock.
  virtual Status LockFile(const std::string& fname,
                          std::unique_ptr<FileLock>* lock) = 0;

  // Microseconds since some fixed point, monotonic.
  virtual uint64_t NowMicros() = 0;
  virtual void SleepForMicroseconds(int micros) = 0;
};

// Convenience helpers.
Status WriteStringToFile(Env* env, const Slice& data, const std::string& fname,
                         bool sync);
Status ReadFileToString(Env* env, const std::string& fname, std::string* data);

}  // namespace shale

#endif  // SHALE_UTIL_ENV_H_
