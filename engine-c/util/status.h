// Status: the result of an operation that can fail.
//
// Errors are values, never exceptions. An OK status, and an error without
// a message (a plain NotFound on a lookup miss), cost no allocation; an
// error with a message holds it on the heap. Codes mirror the SHALE_*
// codes of include/shale/engine.h one for one, so the C API passes them
// through unchanged.
//
// Thread safety: const methods may be called concurrently; anything else
// needs external synchronization.

#ifndef SHALE_UTIL_STATUS_H_
#define SHALE_UTIL_STATUS_H_

#include <memory>
#include <string>

#include "util/slice.h"

namespace shale {

class Status {
 public:
  // DO NOT CHANGE THESE VALUES: they equal the SHALE_* codes of engine.h.
  enum Code {
    kOk = 0,
    kNotFound = 1,
    kCorruption = 2,
    kNotSupported = 3,
    kInvalidArgument = 4,
    kIOError = 5,
    kNoSpace = 6,
    kBufferTooSmall = 7,
    kBackgroundError = 8,
    kClosed = 9,
    kBusy = 10,
  };

  Status() noexcept = default;
  Status(const Status& rhs) { CopyFrom(rhs); }
  Status& operator=(const Status& rhs) {
    if (this != &rhs) CopyFrom(rhs);
    return *this;
  }
  // A moved-from Status is OK.
  Status(Status&& rhs) noexcept : code_(rhs.code_), msg_(std::move(rhs.msg_)) {
    rhs.code_ = kOk;
  }
  Status& operator=(Status&& rhs) noexcept {
    if (this != &rhs) {
      code_ = rhs.code_;
      msg_ = std::move(rhs.msg_);
      rhs.code_ = kOk;
    }
    return *this;
  }

  static Status OK() { return Status(); }
  static Status NotFound(const Slice& msg, const Slice& msg2 = Slice()) {
    return Status(kNotFound, msg, msg2);
  }
  static Status Corruption(const Slice& msg, const Slice& msg2 = Slice()) {
    return Status(kCorruption, msg, msg2);
  }
  static Status NotSupported(const Slice& msg, const Slice& msg2 = Slice()) {
    return Status(kNotSupported, msg, msg2);
  }
  static Status InvalidArgument(const Slice& msg, const Slice& msg2 = Slice()) {
    return Status(kInvalidArgument, msg, msg2);
  }
  static Status IOError(const Slice& msg, const Slice& msg2 = Slice()) {
    return Status(kIOError, msg, msg2);
  }
  static Status NoSpace(const Slice& msg, const Slice& msg2 = Slice()) {
    return Status(kNoSpace, msg, msg2);
  }
  static Status BufferTooSmall(const Slice& msg, const Slice& msg2 = Slice()) {
    return Status(kBufferTooSmall, msg, msg2);
  }
  static Status BackgroundError(const Slice& msg, const Slice& msg2 = Slice()) {
    return Status(kBackgroundError, msg, msg2);
  }
  static Status Closed(const Slice& msg, const Slice& msg2 = Slice()) {
    return Status(kClosed, msg, msg2);
  }
  static Status Busy(const Slice& msg, const Slice& msg2 = Slice()) {
    return Status(kBusy, msg, msg2);
  }
  // Builds a status from an errno value: ENOSPC becomes NoSpace, ENOENT
  // NotFound, anything else IOError. context names the file or operation.
  static Status FromErrno(const Slice& context, int err);

  bool ok() const { return code_ == kOk; }
  Code code() const { return code_; }
  bool IsNotFound() const { return code() == kNotFound; }
  bool IsCorruption() const { return code() == kCorruption; }
  bool IsIOError() const { return code() == kIOError; }
  bool IsNoSpace() const { return code() == kNoSpace; }
  bool IsNotSupported() const { return code() == kNotSupported; }
  bool IsInvalidArgument() const { return code() == kInvalidArgument; }

  // The message without the code name ("" when OK).
  const std::string& message() const;
  // "OK" or "<code name>: <message>".
  std::string ToString() const;

 private:
  Status(Code code, const Slice& msg, const Slice& msg2);
  void CopyFrom(const Status& rhs) {
    code_ = rhs.code_;
    msg_ = rhs.msg_ ? std::make_unique<std::string>(*rhs.msg_) : nullptr;
  }

  Code code_ = kOk;
  std::unique_ptr<std::string> msg_;  // nullptr when there is no message
};

}  // namespace shale

#endif  // SHALE_UTIL_STATUS_H_
