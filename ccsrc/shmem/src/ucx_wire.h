// What UCX peers send each other: the active messages and their headers.
// Every field is read by the target's CPU, which checks it before use (a
// malformed message is dropped, never applied).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ucx_transport.h"

namespace hpshmem {

enum UcxAmId : unsigned {
  kAmSignal = 1,
  kAmPutSignal,
  kAmQuietReq,
  kAmQuietAck,
  kAmFetchReply,
  kAmLeave,
  kAmGet,
  kAmGetReply,
  kAmAmo,
  kAmHeartbeat  // header: the sender's rank (int32); see UcxTransport::Watch
};

constexpr uint8_t kNoSignal = 0;  // PutSignalHdr::type of a plain put

#pragma pack(push, 1)
struct SignalHdr {
  uint64_t off;
  int64_t value;
  uint8_t type, op;
};
struct PutSignalHdr {
  uint64_t off, sig_off;
  int64_t value;
  uint8_t type, op;
  int32_t from;
  uint64_t echo;  // nonzero: answer with a quiet echo of this number once handled
};
struct QuietHdr {
  int32_t from;
  uint64_t seq;
};
// Any AmoOp; answered with a FetchReplyHdr.
struct AmoHdr {
  int32_t from;
  uint64_t seq, off;
  int64_t value, compare;
  uint8_t type, op;
};
struct FetchReplyHdr {
  uint64_t seq;
  int64_t old;
};
struct GetHdr {
  int32_t from;
  uint64_t seq, off, len;
};
struct GetReplyHdr {
  uint64_t seq, pos;  // `pos`: where this piece goes in the requested range
};
#pragma pack(pop)

// Messages of at most kAmChunk bytes that carry `bytes` (one, when empty: it still carries the header).
inline size_t Pieces(size_t bytes) { return bytes ? (bytes + kAmChunk - 1) / kAmChunk : 1; }

}  // namespace hpshmem
