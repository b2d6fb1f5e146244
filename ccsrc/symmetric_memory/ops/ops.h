// The RFC's kernels (ccsrc/symmetric_memory/ops/*) on CPU hosts: one-sided
// copies split across `block_dim` worker threads (the RFC's AIV cores), and
// the signal operations. Sizes are BYTES; pointers are raw addresses (the
// Python adapters convert elements and offsets before calling).
//
// Every op validates its whole request before writing anything; errors come
// from the runtime unchanged (see hpshmem/hpshmem.h for the codes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hpshmem/hpshmem.h"
#include "ops/checks/checks.h"
#include "ops/reduce/reduce.h"

namespace hpshmem::ops {

// block_dim: threads that split the bytes; 0 takes the runtime default
// ($HYPER_PARALLEL_SHMEM_BLOCK_DIM). Copies smaller than 2 MiB per thread
// run on the calling thread alone: below that, waking a thread costs more
// than it saves.

// target (symmetric) on rank pe  <-  src (any local memory), `bytes` bytes.
Status PutMem(void* target, const void* src, size_t bytes, int pe, int block_dim = 0);
// dst (any local memory)  <-  src (symmetric) on rank pe.
Status GetMem(void* dst, const void* src, size_t bytes, int pe, int block_dim = 0);
// Put, fence, then signal (SET or ADD) on rank pe's `sig`: a waiter that sees
// the signal sees all the data. Validates the signal before copying.
Status PutMemSignal(void* target, const void* src, size_t bytes, void* sig, SignalType type, int64_t value, SignalOp op,
                    int pe, int block_dim = 0);
// Atomic SET/ADD on rank pe's signal word.
Status SignalOpRemote(void* sig, SignalType type, int64_t value, SignalOp op, int pe);
// Blocks until the local signal compares true; see hpshmem::SignalWaitUntil
// (only the loss of a member of `team` fails it).
Status SignalWaitUntil(const void* sig, SignalType type, Cmp cmp, int64_t value, int64_t* observed,
                       const char* label = nullptr, int team = kTeamWorld);

// ---------------------------------------------------------------- collective copies
// The data movement of allgather and alltoall, and the epoch protocol they
// share with the fused ops of the Python algorithms layer.
//
// Why epochs: signals are never reset. Collective call number e (counted
// alike on every rank, since collectives are called in the same order
// everywhere) sets or adds signals so that "call e is done" is a >=
// comparison against a value that only grows: nobody re-zeroes anything.
// Why clear-to-send: as with MPI, a rank's outputs of call e must stay as
// they are until that rank itself enters call e+1. A rank entering a call
// announces it to every peer (ready[me] = e on each); a peer writes into this
// rank's buffers only after seeing it.
//
// Teams: every call below runs among the members of `team` (hpshmem.h,
// "teams"; kTeamWorld by default), with ranks, roots and peers given as TEAM
// ranks and buffers laid out by team rank. Each team has its own words and
// epochs, so teams run their collectives concurrently; ranks outside a team
// take no part and never block, and only a member's loss fails its waits.
//
// A team's words and eager slots, in each member's collective workspace,
// are laid out in ops/collective/team_block.h; this rank's counters of the
// team's calls in ops/collective/counters.h.

// Enters the team's next collective call: *epoch = its number, announced to every member (this one too).
// Errors (every call here): kNotInitialized; kInvalidArgument for an unknown team; kUnsupported
// past the ranks the workspace holds (world).
Status CollectiveBegin(int64_t* epoch, int team = kTeamWorld);
// *epoch = the number of the team's last call this rank entered (0: none yet).
Status CollectiveEpoch(int64_t* epoch, int team = kTeamWorld);
// Blocks until member `peer` has entered call `epoch` (its buffers may be written).
Status CollectiveWaitReady(int peer, int64_t epoch, int team = kTeamWorld);
// Blocks until `n` more put-with-signal ADDs have reached this rank's arrival counter.
Status CollectiveWaitArrivals(int64_t n, int team = kTeamWorld);
// Blocks until peers have finished every read of this rank's buffers announced so far,
// plus `extra` more (which then count as announced).
Status CollectiveWaitConsumed(int64_t extra, int team = kTeamWorld);
// Tells member `peer` that this rank has finished reading its buffers.
Status CollectiveConsumed(int peer, int team = kTeamWorld);
// Collective over the team: Quiet, then waits until every member has entered.
Status TeamBarrier(int team);

// Collective. out (symmetric, W * bytes) on every rank = each rank's `in`
// (`bytes` bytes) in rank order; `in` may be this rank's own slot of `out`.
// pull: each rank reads the pieces itself, in rank order.
Status Allgather(void* out, const void* in, size_t bytes, bool pull, int block_dim = 0, int team = kTeamWorld);

// Collective. sends[p] (send_elems[p] elements of `itemsize` bytes) goes to
// rank p; `recv` (symmetric) receives the pieces packed in source-rank order,
// recv_elems[q] elements from rank q. pull: every sends[p] must be symmetric.
// A size that disagrees with its sender fails with kCollectiveMismatch on both
// sides, after the call has completed everywhere (nobody hangs).
Status Alltoall(const void* const* sends, const int64_t* send_elems, void* recv, const int64_t* recv_elems,
                size_t itemsize, bool pull, int block_dim = 0, int team = kTeamWorld);

// ---------------------------------------------------------------- reducing collectives
// Deterministic: every rank reduces the ranks' values in rank order (0, 1,
// ..., W-1), so all get the same bits, call after call. Ranks that pass
// different counts, dtypes, ops or roots fail with kCollectiveMismatch on
// every rank, before any buffer is touched.

enum class AllreduceAlgorithm : int {
  kAuto,     // one-shot up to kOneShotMaxBytes, two-shot above
  kOneShot,  // every rank reads every rank's whole tensor and reduces all of it
  kTwoShot,  // rank r reduces block r of every rank's tensor, then puts it into everyone's block r
};
constexpr size_t kOneShotMaxBytes = 256 * 1024;

// Collective. `data` (symmetric, `count` elements of `dtype`) becomes, on
// every rank, the element-wise `op` of every rank's `data` — or, with `src`
// (any memory, `count` elements), of every rank's `src`.
Status Allreduce(void* data, size_t count, DType dtype, ReduceOp op,
                 AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto, int team = kTeamWorld,
                 const void* src = nullptr);

// Collective. `out` (`count` elements, any memory) = block r (elements
// [r*count, (r+1)*count)) of the element-wise `op` of every rank's `in`
// (symmetric, W*count elements), on rank r. `in` is unchanged.
Status ReduceScatter(void* out, const void* in, size_t count, DType dtype, ReduceOp op, int team = kTeamWorld);

// Collective. `data` (symmetric, `bytes` bytes) on every rank but root =
// root's `src` (any memory on root; default: root's `data`, which `src` leaves as it is).
Status Broadcast(void* data, size_t bytes, int root, int team = kTeamWorld, const void* src = nullptr);
// The largest piece (bytes) that the team's calls send eagerly, into the
// receivers' slots without waiting for them: 32 KiB down to 64 B as teams grow
// when the team spans hosts, 4 KiB down within one (ops/collective/team_block.h);
// the same on every member. Errors: kNotInitialized; kInvalidArgument for an unknown team.
Status EagerLimit(int team, size_t* bytes);
// Broadcast of at most EagerLimit(team) bytes in one step: the root
// puts its data into each member's eager slot and returns; members copy it
// out (`data` need not be symmetric). As OpenSHMEM allows, the root does not
// wait for the members to enter the call (only for them to have entered the
// previous one). Members see a size or root that differs from the root's
// (kCollectiveMismatch); the root does not, and ranks that disagree on who
// the root is wait until the timeout. Every member must take this path for
// the call (the same bytes: the OpenSHMEM layer decides by size).
Status BroadcastSmall(void* data, size_t bytes, int root, int team = kTeamWorld, const void* src = nullptr);

}  // namespace hpshmem::ops
