// Expert-parallel dispatch and combine for mixture-of-experts layers, on the
// symmetric heap: each rank writes its tokens straight into the receive space
// of the ranks that own their experts and signals how many it wrote; the
// counts travel with the data (no count exchange, no barrier).
//
// Experts are split evenly over the team's ranks: rank r owns global experts
// [r * L, (r + 1) * L), L = num_experts / W. A token goes once to each rank
// owning at least one of its top-k experts, whatever the number of its
// experts there.
//
// Why epochs: a buffer's signals are never reset. Dispatch number e (counted
// alike on every member) sets the count word of its source to
// (e << 32) | rows, so "source s has arrived" is word >= e << 32; a source
// that refused its arguments sets (e << 32) | kPoison instead, and every
// member then fails the call (all members complete it, so the next call finds
// the buffer clean). Why acknowledgements: a source writes call e into a
// rank's space only once that rank has acknowledged call e - 1 from it (it has
// copied it out), so one buffer serves call after call.
//
// Units: tokens and rows count ROWS; hidden sizes are ELEMENTS; addresses
// and *_bytes are bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hpshmem/hpshmem.h"
#include "hpshmem/status.h"
#include "ops/reduce/reduce.h"

namespace hpshmem::ops {

struct MoeConfig {
  int64_t max_tokens = 0;         // per rank and call, >= 0
  int64_t hidden = 0;             // elements per token, >= 1
  DType dtype = DType::kFloat32;  // float32, float64, float16 or bfloat16
  int64_t num_experts = 0;        // a multiple of the team's size, >= 1
  int topk = 0;                   // experts per token, 1..64
  int team = kTeamWorld;
};

// The symmetric space a buffer needs on every rank, in bytes; 0 with *error
// set when the configuration is refused (kInvalidArgument / kTypeError naming
// the argument as the Python API does).
size_t MoeBufferBytes(const MoeConfig& config, int team_size, Status* error);

// One buffer of one team. Not thread-safe: one call at a time per buffer, the
// same calls in the same order on every member (as for every collective).
class MoeBuffer {
 public:
  // Collective over the team (every member, with the same config): lays the
  // buffer over `base` (symmetric, MoeBufferBytes bytes, at the same offset on
  // every member), zeroes its words and agrees the config with every member.
  // Errors: kInvalidArgument / kTypeError (config, base), kCollectiveMismatch on
  // every member when members passed different configs, kTimeout, kPeerDead.
  static Status Create(const MoeConfig& config, void* base, size_t bytes, MoeBuffer** out);

  const MoeConfig& config() const { return config_; }
  int team_size() const { return world_; }
  int team_rank() const { return me_; }
  int64_t local_experts() const { return local_experts_; }
  size_t bytes() const { return bytes_; }
  int64_t dispatches() const { return dispatch_epoch_; }
  int64_t combines() const { return combine_epoch_; }

 private:
  friend struct MoeAccess;
  MoeConfig config_;
  int world_ = 0, me_ = -1;
  std::vector<int> pes_;
  int64_t local_experts_ = 0;
  char* base_ = nullptr;
  size_t bytes_ = 0;
  // Layout, in bytes from base_ (moe_buffer.cc).
  size_t dispatch_stride_ = 0;  // one received token: its row, then its k expert ids and k weights
  size_t combine_stride_ = 0;   // one partial sum row (float32; float64 for float64)
  size_t dispatch_region_ = 0, combine_region_ = 0, staging_ = 0;
  int64_t dispatch_epoch_ = 0, combine_epoch_ = 0;
};

enum class MoeLayout : int { kRankMajor = 0, kExpertMajor = 1 };

// One dispatch: its routing, kept for the combine (and the backward passes).
struct MoeDispatchHandle {
  int64_t epoch = 0;
  MoeLayout layout = MoeLayout::kRankMajor;
  int64_t alignment = 1;
  int64_t tokens = 0;  // this rank's source tokens
  int topk = 0;
  bool received = false, unpacked = false, failed = false;
  std::vector<int32_t> slot;           // tokens x W: the token's row at rank d (-1: not sent there)
  std::vector<int64_t> sent;           // W: rows sent to each rank
  std::vector<int64_t> received_from;  // W: rows received from each source
  std::vector<int64_t> expert_rows;    // local experts: their received rows, rounded up to alignment
  int64_t rows = 0;                    // rows of recv_x
  // Per row of recv_x: its source, its slot there, and (expert_major) its
  // local expert; -1 for padding rows.
  std::vector<int32_t> row_source, row_slot, row_expert;
  std::vector<int32_t> row_topk;  // rows x k: local expert ids, -1 elsewhere
  // Set when the caller keeps x until the unpack: this rank's own tokens skip
  // its space (their ids and weights still go there) and are copied straight
  // from x, one pass over them instead of two. own_tokens[i]: the token of
  // this rank's own slot i.
  const char* own_x = nullptr;
  std::vector<int32_t> own_tokens;
};

// Source side of dispatch call: checks the arguments (x: tokens x hidden
// elements of the buffer's dtype; topk_idx: tokens x k ints of idx_bytes 4 or
// 8, -1 = dropped; weights: tokens x k float32 or null), then writes each
// rank's tokens into its space and signals it. On a refused argument it
// signals the refusal instead (every member then fails the call) and returns
// the refusal; the caller then still calls MoeDispatchWait, which completes
// the call. keep_own: the caller keeps x valid and unchanged until
// MoeDispatchUnpack or MoeDispatchRelease (a synchronous call), so this
// rank's own tokens are copied from x there. Errors: kInvalidArgument naming
// the argument, kTimeout, kPeerDead.
Status MoeDispatchSend(MoeBuffer* buffer, const void* x, int64_t tokens, int64_t hidden, DType dtype,
                       const void* topk_idx, int64_t idx_rows, int64_t idx_cols, int idx_bytes, const float* weights,
                       int64_t weight_rows, int64_t weight_cols, MoeLayout layout, int64_t alignment, bool keep_own,
                       MoeDispatchHandle* handle);
// A refusal found before MoeDispatchSend could run (the front end's own
// reading of its arguments): signals it as MoeDispatchSend does.
Status MoeDispatchRefuse(MoeBuffer* buffer, MoeDispatchHandle* handle);
// Which sources' tokens of this call have arrived (W flags); never blocks.
void MoeDispatchArrived(const MoeBuffer& buffer, const MoeDispatchHandle& handle, std::vector<bool>* arrived);
// Receiving side: waits for every source, then fills handle's counts
// (received_from, expert_rows, rows). A source's refusal fails the call on
// this rank too (kCollectiveMismatch naming it), after acknowledging every
// source. Errors: kTimeout, kPeerDead, kCollectiveMismatch.
Status MoeDispatchWait(MoeBuffer* buffer, MoeDispatchHandle* handle);
// Copies the received tokens out (recv_x: rows x hidden; recv_topk: rows x k
// int64, local expert ids or -1; recv_weights: rows x k float32, 0 where -1;
// expert_counts: local experts int64) and acknowledges every source.
// Pointers may be null when rows is 0 (expert_counts when L is 0); recv_weights
// may be null always (no weights wanted).
Status MoeDispatchUnpack(MoeBuffer* buffer, MoeDispatchHandle* handle, void* recv_x, int64_t* recv_topk,
                         float* recv_weights, int64_t* expert_counts);

// Gives the call's received tokens up without copying them (a front end that
// failed between MoeDispatchWait and MoeDispatchUnpack): acknowledges every
// source, so the next call proceeds.
Status MoeDispatchRelease(MoeBuffer* buffer, MoeDispatchHandle* handle);

// One combine's progress.
struct MoeCombineHandle {
  int64_t epoch = 0;
  bool failed = false;
  // Set when the caller keeps expert_out until MoeCombineWait: this rank's own
  // partial sums skip its space and are summed from expert_out there.
  // own_rows[own_start[i] .. own_start[i + 1]): the rows of own slot i.
  const void* own_out = nullptr;
  const float* own_weights = nullptr;
  std::vector<int64_t> own_start, own_rows;
};

// Sends each source the sum over this rank's rows of each of its tokens
// (expert_out: handle.rows x hidden elements of the buffer's dtype; weights:
// null, or handle.rows x k float32 — a row is multiplied by the sum of its
// token's weights over the row's experts: the row's one expert in
// expert_major, the token's experts on this rank in rank_major). Padding rows
// are ignored. Refusals as MoeDispatchSend. keep_own: the caller keeps
// expert_out and weights valid and unchanged until MoeCombineWait (a
// synchronous call), which then sums this rank's own rows straight from them.
Status MoeCombineSend(MoeBuffer* buffer, const MoeDispatchHandle& dispatch, const void* expert_out, int64_t rows,
                      int64_t hidden, DType dtype, const float* weights, int64_t weight_rows, int64_t weight_cols,
                      bool keep_own, MoeCombineHandle* handle);
Status MoeCombineRefuse(MoeBuffer* buffer, MoeCombineHandle* handle);
// Waits for every rank's partial sums and writes out (dispatch.tokens x
// hidden elements of the buffer's dtype): each token's sum over the ranks in
// rank order (float32 accumulation for half precision, rounded once), zero
// for a token that selected no expert. Acknowledges every rank.
Status MoeCombineWait(MoeBuffer* buffer, const MoeDispatchHandle& dispatch, MoeCombineHandle* handle, void* out);

}  // namespace hpshmem::ops
