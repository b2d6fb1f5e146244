#include "hpshmem/status.h"

#include <cerrno>
#include <cstring>

namespace hpshmem {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kTypeError:
      return "type_error";
    case Code::kNotInitialized:
      return "not_initialized";
    case Code::kTimeout:
      return "timeout";
    case Code::kPeerDead:
      return "peer_dead";
    case Code::kOutOfMemory:
      return "out_of_memory";
    case Code::kInvalidFree:
      return "invalid_free";
    case Code::kCollectiveMismatch:
      return "collective_mismatch";
    case Code::kBootstrap:
      return "bootstrap";
    case Code::kSystem:
      return "system";
    case Code::kUnsupported:
      return "unsupported";
    case Code::kInternal:
      return "internal";
  }
  return "unknown";
}

Status Status::FromErrno(const std::string& what) {
  int e = errno;
  return Status(Code::kSystem, what + ": " + std::strerror(e) + " (errno " + std::to_string(e) + ")");
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + msg_;
}

}  // namespace hpshmem
