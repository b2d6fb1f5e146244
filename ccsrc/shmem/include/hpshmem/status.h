// Status: the result of every fallible runtime call (LevelDB style).
//
// One Code per failure kind. The layer that can name the cause builds the
// Status; callers above carry it up unchanged. The Python binding maps each
// Code to one exception class.
#pragma once

#include <string>
#include <utility>

namespace hpshmem {

enum class Code : int {
  kOk = 0,
  kInvalidArgument = 1,     // a value is out of range / malformed
  kTypeError = 2,           // a value has the wrong kind (dtype, width)
  kNotInitialized = 3,      // call before Init / after Finalize
  kTimeout = 4,             // a wait or barrier passed its deadline
  kPeerDead = 5,            // a peer process exited or was killed
  kOutOfMemory = 6,         // symmetric heap exhausted
  kInvalidFree = 7,         // double free / foreign pointer
  kCollectiveMismatch = 8,  // ranks disagree on a collective call
  kBootstrap = 9,           // rendezvous / authentication failure
  kSystem = 10,             // an OS call failed (errno in the message)
  kUnsupported = 11,        // valid request this build cannot serve
  kInternal = 12,           // a bug in the runtime
};

// Stable lowercase name of a code ("timeout", "peer_dead", ...).
const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), msg_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status TypeError(std::string m) { return {Code::kTypeError, std::move(m)}; }
  static Status NotInitialized(std::string m) { return {Code::kNotInitialized, std::move(m)}; }
  static Status Timeout(std::string m) { return {Code::kTimeout, std::move(m)}; }
  static Status PeerDead(std::string m) { return {Code::kPeerDead, std::move(m)}; }
  static Status OutOfMemory(std::string m) { return {Code::kOutOfMemory, std::move(m)}; }
  static Status InvalidFree(std::string m) { return {Code::kInvalidFree, std::move(m)}; }
  static Status CollectiveMismatch(std::string m) { return {Code::kCollectiveMismatch, std::move(m)}; }
  static Status Bootstrap(std::string m) { return {Code::kBootstrap, std::move(m)}; }
  static Status Unsupported(std::string m) { return {Code::kUnsupported, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  // Builds a kSystem status from `what` and the current errno.
  static Status FromErrno(const std::string& what);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return msg_; }
  // "timeout: <message>" or "ok".
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string msg_;
};

}  // namespace hpshmem

#define HPSHMEM_RETURN_IF_ERROR(expr)  \
  do {                                 \
    ::hpshmem::Status _hp_st = (expr); \
    if (!_hp_st.ok()) return _hp_st;   \
  } while (0)
