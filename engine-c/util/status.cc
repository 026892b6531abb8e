#include "util/status.h"

#include <cerrno>
#include <cstring>

namespace shale {

Status::Status(Code code, const Slice& msg, const Slice& msg2) : code_(code) {
  if (msg.empty() && msg2.empty()) return;
  msg_ = std::make_unique<std::string>(msg.data(), msg.size());
  if (!msg2.empty()) {
    if (!msg.empty()) msg_->append(": ");
    msg_->append(msg2.data(), msg2.size());
  }
}

Status Status::FromErrno(const Slice& context, int err) {
  const char* what = strerror(err);
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return NoSpace(context, what);
    case ENOENT:
      return NotFound(context, what);
    default:
      return IOError(context, what);
  }
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return msg_ ? *msg_ : kEmpty;
}

std::string Status::ToString() const {
  if (code_ == kOk) return "OK";
  const char* name = "Unknown code";
  switch (code_) {
    case kOk:
      name = "OK";
      break;
    case kNotFound:
      name = "NotFound";
      break;
    case kCorruption:
      name = "Corruption";
      break;
    case kNotSupported:
      name = "Not supported";
      break;
    case kInvalidArgument:
      name = "Invalid argument";
      break;
    case kIOError:
      name = "IO error";
      break;
    case kNoSpace:
      name = "No space";
      break;
    case kBufferTooSmall:
      name = "Buffer too small";
      break;
    case kBackgroundError:
      name = "Background error";
      break;
    case kClosed:
      name = "Closed";
      break;
    case kBusy:
      name = "Busy";
      break;
  }
  std::string r(name);
  if (msg_ != nullptr && !msg_->empty()) {
    r.append(": ");
    r.append(*msg_);
  }
  return r;
}

}  // namespace shale
