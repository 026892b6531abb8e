#include "util/status.h"

#include <cerrno>
#include <cstring>

namespace shale {

Status::Status(Code code, const Slice& msg, const Slice& msg2)
    : state_(std::make_unique<State>()) {
  state_->code = code;
  state_->msg.assign(msg.data(), msg.size());
  if (!msg2.empty()) {
    state_->msg.append(": ");
    state_->msg.append(msg2.data(), msg2.size());
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
  return state_ ? state_->msg : kEmpty;
}

std::string Status::ToString() const {
  if (state_ == nullptr) return "OK";
  const char* name = "Unknown code";
  switch (state_->code) {
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
  if (!state_->msg.empty()) {
    r.append(": ");
    r.append(state_->msg);
  }
  return r;
}

}  // namespace shale
